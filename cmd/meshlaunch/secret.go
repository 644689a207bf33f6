package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/identity"
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
