package main

import (
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

const (
	flagTokenFile = "token-file"
	// envToken holds the secret itself. It is read from the environment
	// only: a flag value would show in ps.
	envToken = "MESHLAUNCH_TOKEN"
)

func tokenFileFlag() cli.Flag {
	return withEnv(&cli.StringFlag{
		Name:  flagTokenFile,
		Usage: "file holding the shared secret on one line (or set " + envToken + " to the secret itself)",
	})
}

// readSecret returns the shared secret from --token-file or MESHLAUNCH_TOKEN
// and checks its length; errors say how to provide one.
func readSecret(cmd *cli.Command) (string, error) {
	var secret, from string
	if path := cmd.String(flagTokenFile); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", usageErrorf("read the secret: %w", err)
		}
		secret, from = string(b), path
	} else if v, ok := os.LookupEnv(envToken); ok {
		secret, from = v, "$"+envToken
	} else {
		return "", usageErrorf("no shared secret: pass --%s FILE (or $%s) or set $%s; make one with 'meshlaunch token'",
			flagTokenFile, envName(flagTokenFile), envToken)
	}
	secret = strings.TrimSpace(secret)
	if strings.ContainsAny(secret, "\n\r") {
		return "", usageErrorf("secret from %s: must be one line", from)
	}
	if _, err := identity.Derive(secret); err != nil {
		return "", usageErrorf("secret from %s: %w", from, err)
	}
	return secret, nil
}

const flagRequireTLS = "require-tls"

func requireTLSFlag() cli.Flag {
	return withEnv(&cli.BoolFlag{Name: flagRequireTLS, Usage: "refuse a ws:// server URL: the credential and the traffic's metadata would cross the network in clear text"})
}

// serverURL parses --server and applies --require-tls; without it a ws://
// URL to a host other than loopback is allowed but logged.
func (a *app) serverURL(cmd *cli.Command) (*url.URL, error) {
	if cmd.String("server") == "" {
		return nil, usageErrorf("%s: --server is required (the sidecar's ws:// or wss:// URL)", cmd.Name)
	}
	u, err := wsproxy.ParseServerURL(cmd.String("server"))
	if err != nil {
		return nil, usageError{fmt.Errorf("--server: %w", err)}
	}
	if u.Scheme == "ws" {
		if cmd.Bool(flagRequireTLS) {
			return nil, usageErrorf("--server %s: --%s is set, so the URL must be wss://", u.Redacted(), flagRequireTLS)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err != nil || !ip.IsLoopback() {
			a.log.Warn("the server URL is ws://: the credential crosses the network unencrypted; use wss:// (or --require-tls to refuse ws://)", "server", u.Redacted())
		}
	}
	return u, nil
}
