package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/tunnel"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

func (a *app) tunnelCommand() *cli.Command {
	return &cli.Command{
		Name:     "tunnel",
		Category: categoryRoles,
		Usage:    "forward ports and offer SOCKS5 through the sidecar, without namespaces (the fast path)",
		Description: `Needs no user namespaces and no /dev/net/tun: each forwarded connection gets
its own websocket to the sidecar, which dials from the pod (after its
destination policy, checked on the resolved address) or listens on the pod.

  -L [BIND:]PORT:HOST:PORT[/udp]  listen here (BIND 127.0.0.1), the pod dials HOST:PORT;
                                  HOST may be a cluster name, resolved in the pod
  -R PORT:HOST:PORT[/udp]         the pod listens on PORT (one of the sidecar's --expose
                                  ports), each connection is dialed here to HOST:PORT
  --socks [BIND:]PORT             a SOCKS5 proxy (CONNECT, UDP ASSOCIATE) leaving from the pod
  --stdio HOST:PORT               stdin/stdout to HOST:PORT, for ssh's ProxyCommand

  meshlaunch tunnel --server wss://mesh.example.org/pod-a --token-file ~/.mesh/pod-a \
      -L 5432:postgres.db.svc.cluster.local:5432 -R 8888:localhost:8888

Prefer it over 'meshlaunch run' when a job needs a port or two, or when the
node has no user namespaces. More in docs/tunnel.md.`,
		Flags: []cli.Flag{
			withEnv(&cli.StringFlag{Name: "server", Usage: "the sidecar's URL, ws:// or wss://, with the Ingress path prefix (required)"}),
			tokenFileFlag(),
			requireTLSFlag(),
			withEnv(&cli.StringSliceFlag{Name: "local", Aliases: []string{"L"}, Usage: "local forward [BIND:]PORT:HOST:PORT[/udp] (repeat)"}),
			withEnv(&cli.StringSliceFlag{Name: "remote", Aliases: []string{"R"}, Usage: "reverse forward PORT:HOST:PORT[/udp] (repeat)"}),
			withEnv(&cli.StringSliceFlag{Name: "socks", Usage: "SOCKS5 proxy on [BIND:]PORT (repeat)"}),
			withEnv(&cli.StringFlag{Name: "stdio", Usage: "connect stdin/stdout to HOST:PORT through the pod (ssh ProxyCommand)"}),
			withEnv(&cli.BoolFlag{Name: "proxy-protocol", Usage: "send a PROXY protocol v1 header with the pod-side client address on every -R TCP connection"}),
			withEnv(&cli.StringFlag{Name: "ca-file", Usage: "PEM bundle trusted for the sidecar and the proxy"}),
			withEnv(&cli.BoolFlag{Name: "insecure", Usage: "do not verify the sidecar's certificate (logged loudly)"}),
			pprofFlag(),
		},
		Action: a.action(a.runTunnel),
	}
}

func (a *app) runTunnel(ctx context.Context, cmd *cli.Command) error {
	if err := noArgs(cmd); err != nil {
		return err
	}
	c, locals, remotes, socks, err := a.tunnelClient(cmd)
	if err != nil {
		return err
	}
	hp := cmd.String("stdio")
	if hp != "" && len(locals)+len(remotes)+len(socks) > 0 {
		return usageErrorf("tunnel: --stdio cannot be combined with -L, -R or --socks")
	}
	if hp == "" && len(locals)+len(remotes)+len(socks) == 0 {
		return usageErrorf("tunnel: nothing to do: give -L, -R, --socks or --stdio")
	}
	stopPprof, err := a.startPprof(ctx, cmd)
	if err != nil {
		return err
	}
	defer stopPprof()
	if hp != "" {
		return c.Stdio(ctx, hp, os.Stdin, os.Stdout)
	}
	if err := c.Run(ctx, locals, remotes, socks); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tunnel: %w", err)
	}
	return nil
}

func (a *app) tunnelClient(cmd *cli.Command) (*tunnel.Client, []tunnel.Forward, []tunnel.Forward, []netip.AddrPort, error) {
	u, err := a.serverURL(cmd)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	secret, err := readSecret(cmd)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var errs []error
	var locals, remotes []tunnel.Forward
	var socks []netip.AddrPort
	for _, s := range cmd.StringSlice("local") {
		f, err := tunnel.ParseLocal(s)
		errs = append(errs, flagErr("L", err))
		locals = append(locals, f)
	}
	for _, s := range cmd.StringSlice("remote") {
		f, err := tunnel.ParseRemote(s)
		errs = append(errs, flagErr("R", err))
		f.ProxyProtocol = cmd.Bool("proxy-protocol") && f.Proto == "tcp"
		remotes = append(remotes, f)
	}
	for _, s := range cmd.StringSlice("socks") {
		ap, err := tunnel.ParseSocks(s)
		errs = append(errs, flagErr("socks", err))
		socks = append(socks, ap)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, nil, nil, usageError{err}
	}
	id, _ := identity.Derive(secret) // checked by readSecret
	c, err := tunnel.NewClient(tunnel.ClientConfig{
		URL: u, Credential: id.Credential, Logger: a.log,
		HTTP: wsproxy.HTTPOptions{TLS: wsproxy.TLSOptions{CAFile: cmd.String("ca-file"), Insecure: cmd.Bool("insecure")}},
	})
	if err != nil {
		return nil, nil, nil, nil, usageError{err}
	}
	return c, locals, remotes, socks, nil
}
