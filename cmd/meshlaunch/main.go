// Command meshlaunch connects a job offloaded from Kubernetes to a remote site
// with the network of the pod it stands in for, without privileges on either
// side. See the repository's README.md and docs/design.md.
//
// This file only adapts the process to run; everything testable is in run.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshlaunch/meshlaunch/launcher/child"
)

func main() {
	// The launcher's namespace child re-executes this binary; it must take
	// over before anything else runs (flags, signals, goroutines).
	child.MaybeRun()
	// SIGINT and SIGTERM cancel ctx so that commands can shut down cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
