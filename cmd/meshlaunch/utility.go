package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/identity"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

const categoryUtility = "utilities"

func (a *app) tokenCommand() *cli.Command {
	return &cli.Command{
		Name:     "token",
		Category: categoryUtility,
		Usage:    "print a new random shared secret for one shadow pod",
		Description: `Prints 32 random bytes as unpadded URL-safe base64 (43 characters) and a
newline. Store the line in a Kubernetes Secret for the sidecar and in a file
readable only by the job's user on the remote node: both ends derive the
WireGuard keys and the websocket credential from it. Any secret of at least
16 bytes works; this is a convenient way to make a good one.`,
		Action: a.action(func(_ context.Context, cmd *cli.Command) error {
			if err := noArgs(cmd); err != nil {
				return err
			}
			tok, err := identity.NewToken()
			if err != nil {
				return fmt.Errorf("token: %w", err)
			}
			return writeLine(a.stdout, "token", tok)
		}),
	}
}

func (a *app) keygenCommand() *cli.Command {
	return &cli.Command{
		Name:     "keygen",
		Category: categoryUtility,
		Usage:    "print a new random WireGuard private key",
		Description: `Prints a Curve25519 private key in base64 and a newline, like 'wg genkey'.
Only needed to set WireGuard keys explicitly; by default both ends derive their
keys from the shared secret (see 'meshlaunch token').

  meshlaunch keygen > job.key && meshlaunch pubkey < job.key`,
		Action: a.action(func(_ context.Context, cmd *cli.Command) error {
			if err := noArgs(cmd); err != nil {
				return err
			}
			k, err := identity.NewPrivateKey()
			if err != nil {
				return fmt.Errorf("keygen: %w", err)
			}
			return writeLine(a.stdout, "keygen", k.String())
		}),
	}
}

// maxKeyInput bounds what pubkey reads: a key is 44 characters of base64.
const maxKeyInput = 4096

func (a *app) pubkeyCommand() *cli.Command {
	return &cli.Command{
		Name:     "pubkey",
		Category: categoryUtility,
		Usage:    "read a WireGuard private key on stdin, print its public key",
		Description: `Reads a base64 private key (as 'meshlaunch keygen' or 'wg genkey' print it)
from stdin and prints the matching public key in base64 and a newline, like
'wg pubkey'. Surrounding white space is ignored.

  meshlaunch keygen | tee job.key | meshlaunch pubkey`,
		Action: a.action(func(_ context.Context, cmd *cli.Command) error {
			if err := noArgs(cmd); err != nil {
				return err
			}
			in, err := io.ReadAll(io.LimitReader(a.stdin, maxKeyInput))
			if err != nil {
				return fmt.Errorf("pubkey: read stdin: %w", err)
			}
			if strings.TrimSpace(string(in)) == "" {
				return errors.New("pubkey: stdin is empty: pipe a private key in, e.g. 'meshlaunch keygen | meshlaunch pubkey'")
			}
			k, err := identity.ParsePrivateKey(string(in))
			if err != nil {
				return fmt.Errorf("pubkey: stdin is not a WireGuard private key: %w", err)
			}
			return writeLine(a.stdout, "pubkey", k.Public().String())
		}),
	}
}

func (a *app) versionCommand() *cli.Command {
	return &cli.Command{
		Name:     "version",
		Category: categoryUtility,
		Usage:    "print the version of meshlaunch and of the Go toolchain that built it",
		Action: a.action(func(_ context.Context, cmd *cli.Command) error {
			if err := noArgs(cmd); err != nil {
				return err
			}
			line := fmt.Sprintf("meshlaunch %s (%s, %s/%s)", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return writeLine(a.stdout, "version", line)
		}),
	}
}

// buildVersion is version, or for a binary built without the linker flag by
// "go install ...@vX.Y.Z", the module version recorded in it.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// writeLine writes s and a newline to w; cmd names the command in the error.
func writeLine(w io.Writer, cmd, s string) error {
	if _, err := fmt.Fprintln(w, s); err != nil {
		return fmt.Errorf("%s: write stdout: %w", cmd, err)
	}
	return nil
}
