package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/urfave/cli/v3"
)

// Exit codes of the meshlaunch process.
const (
	exitOK      = 0 // the command succeeded
	exitFailure = 1 // the command started and failed
	exitUsage   = 2 // the command line or environment was rejected
)

const rootDescription = `meshlaunch gives a job that a batch system offloads from Kubernetes (to SLURM,
a VM, another site) the network of the pod it stands in for: the job reaches
cluster Services and DNS, and the cluster reaches the job at the pod IP. It
needs no privileges anywhere: no NET_ADMIN or root in the cluster, and no root,
setuid helper, binary download, iproute2 or slirp4netns on the remote node.

The one binary plays three roles. The sidecar runs in the shadow pod: it ends a
websocket that carries WireGuard into a userspace network stack, sends the
job's traffic out from the pod IP and forwards connections to the pod's exposed
ports to the job. The launcher runs the job on the remote node as an ordinary
user, in its own namespaces, with a TUN interface holding the pod IP and routes
to the cluster. The tunnel mode forwards single ports and offers a SOCKS5 proxy
through the sidecar when a full network is not needed.

Both ends derive their WireGuard keys and websocket credential from one shared
secret per shadow pod, so nothing is exchanged and nothing drifts when the pod
is recreated. The utilities below make that secret and inspect keys.

Every flag can also be set through the environment: --log-level is
MESHLAUNCH_LOG_LEVEL, and so on (upper case, dashes become underscores); a
flag given on the command line wins. Logs go to stderr.

Exit status: 0 on success, 1 when a command fails, 2 when the command line or
the environment is invalid; 'meshlaunch run' exits with the job's own status
(128+N if it died of signal N) once the job has started.`

// app holds what one invocation of meshlaunch reads and writes. Commands use
// its streams, never the os ones, so tests can run them in-process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	// log is built by the root command's Before hook from --log-level and
	// --log-format; it is valid in every command's Action.
	log *slog.Logger

	// started is set when a command's own Action begins. Errors before that
	// point (flag parsing, environment values, argument checks) are usage
	// errors, whichever part of urfave/cli reported them.
	started bool
}

// run executes meshlaunch with args (args[0] is the program name) and returns
// the process exit status. Errors are printed once, as "meshlaunch: <error>".
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, log: discardLogger()}
	err := a.command().Run(ctx, args)
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code) // the job's own status; it said what it had to
	}
	fmt.Fprintf(stderr, "meshlaunch: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) || !a.started {
		return exitUsage
	}
	return exitFailure
}

// command builds the whole command tree. Each call returns a fresh tree
// bound to a.
func (a *app) command() *cli.Command {
	root := &cli.Command{
		Name:        "meshlaunch",
		Usage:       "the network of a Kubernetes pod for a job offloaded elsewhere, without privileges",
		Description: rootDescription,
		Flags: []cli.Flag{
			withEnv(&cli.StringFlag{
				Name:  flagLogLevel,
				Value: "info",
				Usage: "least severe log messages written to stderr: " + strings.Join(logLevelNames, ", "),
			}),
			withEnv(&cli.StringFlag{
				Name:  flagLogFormat,
				Value: "text",
				Usage: "log line format: " + strings.Join(logFormatNames, ", "),
			}),
		},
		Before: a.before,
		Action: a.rootAction,
		Commands: []*cli.Command{
			a.sidecarCommand(),
			a.runCommand(),
			a.tunnelCommand(),
			a.statusCommand(),
			a.doctorCommand(),
			a.manifestCommand(),
			a.tokenCommand(),
			a.keygenCommand(),
			a.pubkeyCommand(),
			a.versionCommand(),
		},
		Reader:    a.stdin,
		Writer:    a.stdout,
		ErrWriter: a.stderr,
		// run prints errors and chooses the exit status; urfave/cli must
		// neither print them nor call os.Exit.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	_ = root.Walk(func(c *cli.Command) error {
		// Without this hook urfave/cli prints usage errors itself
		// ("Incorrect Usage: ...") and run would print them a second time.
		c.OnUsageError = onUsageError
		return nil
	})
	return root
}

// before runs ahead of every command's Action and builds the logger.
func (a *app) before(ctx context.Context, cmd *cli.Command) (context.Context, error) {
	log, err := newLogger(cmd.String(flagLogLevel), cmd.String(flagLogFormat), a.stderr)
	if err != nil {
		return ctx, usageError{err}
	}
	a.log = log
	a.log.Debug("starting", "version", buildVersion(), "args", cmd.Args().Slice())
	return ctx, nil
}

// rootAction runs when no command was named.
func (a *app) rootAction(_ context.Context, cmd *cli.Command) error {
	if cmd.NArg() > 0 {
		return usageErrorf("unknown command %q (run 'meshlaunch --help' for the list)", cmd.Args().First())
	}
	if err := cli.ShowRootCommandHelp(cmd); err != nil {
		return err
	}
	return usageErrorf("no command given")
}

// action wraps the Action of a command so that errors it returns count as
// failures, not usage errors (see app.started).
func (a *app) action(fn cli.ActionFunc) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		a.started = true
		return fn(ctx, cmd)
	}
}

// noArgs rejects positional arguments for a command that takes none.
func noArgs(cmd *cli.Command) error {
	if cmd.NArg() > 0 {
		return usageErrorf("%s takes no arguments, got %q", cmd.Name, cmd.Args().Slice())
	}
	return nil
}

// usageError marks an error as the caller's fault (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// onUsageError turns urfave/cli's parse errors into usage errors that name
// the command and where to find its usage.
func onUsageError(_ context.Context, cmd *cli.Command, err error, isSubcommand bool) error {
	if !isSubcommand {
		return usageError{fmt.Errorf("%w (run '%s --help' for usage)", err, cmd.Name)}
	}
	path := strings.Join(cmd.Path()[1:], " ")
	return usageError{fmt.Errorf("%s: %w (run '%s --help' for usage)", path, err, cmd.FullName())}
}
