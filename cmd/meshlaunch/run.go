package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/launcher"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

func (a *app) runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Category:  categoryRoles,
		Usage:     "run a job on this node inside the pod's network, as yourself, without privileges",
		ArgsUsage: "-- CMD [ARGS...]",
		Description: `Runs CMD in its own user, network, mount and PID namespaces, as your own uid
and gid, with a TUN interface holding the pod's IP, routes to the cluster and a
resolv.conf that resolves cluster names; everything else reaches this node's
network through a built-in userspace NAT. The job starts only once the tunnel
is up; signals are forwarded; the exit status is the job's (128+N if it died
of signal N); when it ends, everything it started ends too.

Needs: unprivileged user namespaces and a usable /dev/net/tun ('meshlaunch
doctor' checks both). Without them, use 'meshlaunch tunnel'.

  meshlaunch run --server wss://mesh.example.org/pod-a --token-file ~/.mesh/pod-a -- mpirun ./app

HTTPS_PROXY / HTTP_PROXY / NO_PROXY are honoured (with proxy credentials).`,
		Flags: []cli.Flag{
			withEnv(&cli.StringFlag{Name: "server", Usage: "the sidecar's URL, ws:// or wss://, with the Ingress path prefix if any (required)"}),
			tokenFileFlag(),
			requireTLSFlag(),
			jobKeyFlag(),
			withEnv(&cli.StringSliceFlag{Name: "route", Usage: "extra CIDR sent through the mesh, on top of the sidecar's routes (repeat)"}),
			withEnv(&cli.StringSliceFlag{Name: "publish", Usage: "forward a host port into the job, [BIND:]HOSTPORT:PORT[/udp] (repeat; BIND defaults to 127.0.0.1)"}),
			withEnv(&cli.StringFlag{Name: "host-network", Value: launcher.HostNetworkNAT, Usage: "reach this node's network through a userspace NAT (nat) or not at all (none)"}),
			withEnv(&cli.BoolFlag{Name: "host-loopback", Usage: "let the job reach this node's 127.0.0.1 at 169.254.64.2 (off: local daemons stay private)"}),
			withEnv(&cli.StringFlag{Name: "ca-file", Usage: "PEM bundle trusted for the sidecar and the proxy, for sites whose proxy re-signs TLS"}),
			withEnv(&cli.BoolFlag{Name: "insecure", Usage: "do not verify the sidecar's certificate (logged loudly; never in production)"}),
			withEnv(&cli.DurationFlag{Name: "wait", Value: 60 * time.Second, Usage: "give up if the tunnel is not up after this long"}),
			withEnv(&cli.DurationFlag{Name: "give-up-after", Usage: "stop the job (and exit non-zero) if the tunnel stays down this long while it runs; 0 waits forever"}),
			withEnv(&cli.BoolFlag{Name: "quiet", Usage: "no status line when the tunnel is up (logs still follow --log-level)"}),
			withEnv(&cli.DurationFlag{Name: "kill-grace", Value: launcher.DefaultKillGrace, Usage: "after SIGTERM/SIGINT, SIGKILL the job if it has not exited within this"}),
			pprofFlag(),
		},
		Action: a.action(a.runRun),
	}
}

func (a *app) runRun(ctx context.Context, cmd *cli.Command) error {
	rc, err := a.runConfig(cmd)
	if err != nil {
		return err
	}
	argv := cmd.Args().Slice()
	if len(argv) == 0 {
		return usageErrorf("run: no command: meshlaunch run [flags] -- CMD [ARGS...]")
	}
	rc.Logger = a.log
	rc.Stdin, rc.Stdout, rc.Stderr = os.Stdin, os.Stdout, os.Stderr
	rc.ForwardSignals = true
	if !cmd.Bool("quiet") {
		rc.Status = a.stderr
	}
	// The launcher's own process (this one) stays in the node's network
	// namespace; only its child enters the job's, so the endpoint is the
	// node's.
	stopPprof, err := a.startPprof(ctx, cmd)
	if err != nil {
		return err
	}
	defer stopPprof()
	// Signals go to the job from here on; the context must not end the
	// launcher before the job has had its say.
	code, err := launcher.Run(context.WithoutCancel(ctx), rc, argv)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// serverConfig reads what every client of a sidecar needs: --server, the
// secret, --ca-file and --insecure.
func (a *app) serverConfig(cmd *cli.Command) (launcher.RunConfig, error) {
	var rc launcher.RunConfig
	u, err := a.serverURL(cmd)
	if err != nil {
		return rc, err
	}
	secret, err := readSecret(cmd)
	if err != nil {
		return rc, err
	}
	key, err := readPrivateKey(cmd.String("private-key-file"))
	if err != nil {
		return rc, err
	}
	return launcher.RunConfig{
		Server: u, Secret: secret, PrivateKey: key,
		HTTP: wsproxy.HTTPOptions{TLS: wsproxy.TLSOptions{CAFile: cmd.String("ca-file"), Insecure: cmd.Bool("insecure")}},
	}, nil
}

func (a *app) runConfig(cmd *cli.Command) (launcher.RunConfig, error) {
	rc, err := a.serverConfig(cmd)
	if err != nil {
		return rc, err
	}
	rc.HostNetwork = cmd.String("host-network")
	rc.HostLoopback = cmd.Bool("host-loopback")
	rc.Wait = cmd.Duration("wait")
	rc.KillGrace = cmd.Duration("kill-grace")
	rc.GiveUpAfter = cmd.Duration("give-up-after")
	var errs []error
	rc.Routes, err = parsePrefixes("route", cmd.StringSlice("route"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range cmd.StringSlice("publish") {
		p, err := launcher.ParsePublish(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--publish: %w", err))
		}
		rc.Publish = append(rc.Publish, p)
	}
	if hn := rc.HostNetwork; hn != launcher.HostNetworkNAT && hn != launcher.HostNetworkNone {
		errs = append(errs, errChoice("host-network", hn, []string{launcher.HostNetworkNAT, launcher.HostNetworkNone}))
	}
	if len(errs) > 0 {
		return rc, usageError{errors.Join(errs...)}
	}
	return rc, nil
}

// exitCode carries the job's exit status out of run without a message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("the job exited with status %d", int(e)) }
