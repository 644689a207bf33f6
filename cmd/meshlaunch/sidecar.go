package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/policy"
	"github.com/meshlaunch/meshlaunch/sidecar"
)

const categoryRoles = "roles"

func (a *app) sidecarCommand() *cli.Command {
	return &cli.Command{
		Name:     "sidecar",
		Category: categoryRoles,
		Usage:    "run in the shadow pod: terminate the mesh, NAT the job's traffic, forward exposed ports",
		Description: `Runs as a container of the shadow pod, as a non-root user with every
capability dropped and no /dev/net/tun. Serves on --listen:
  <prefix>/v1/mesh     the websocket carrying WireGuard (route it through the Ingress)
  <prefix>/v1/status   JSON status (needs the bearer credential; see 'meshlaunch status')
  /healthz /readyz     probes; /readyz fails while starting and shutting down
  /metrics             Prometheus metrics
The job's flows leave from the pod's sockets (egress NAT) if the destination
policy allows them: loopback, 0.0.0.0/8, link-local and cloud metadata,
multicast and broadcast are denied unless a narrow --allow names them.
Connections to --expose ports on the pod are forwarded to the job with the
client's address as the source. Inside the tunnel, ` + "169.254.64.1" + ` answers DNS
with the pod's resolvers and serves the launcher its configuration.

On SIGTERM: not ready, no new sessions, ingress connections or flows;
established flows drain for --shutdown-grace; websockets close with 1001.
Every flag and its environment variable: docs/sidecar.md.`,
		Flags:  sidecarFlags(),
		Action: a.action(a.runSidecar),
	}
}

func sidecarFlags() []cli.Flag {
	return []cli.Flag{
		withEnv(&cli.StringFlag{Name: "listen", Value: ":8080", Usage: "HTTP listen address (websocket, probes, metrics)"}),
		withEnv(&cli.StringFlag{Name: "tls-cert", Usage: "serve HTTPS with this PEM certificate (with --tls-key); usually the Ingress terminates TLS"}),
		withEnv(&cli.StringFlag{Name: "tls-key", Usage: "PEM private key for --tls-cert"}),
		withEnv(&cli.StringFlag{Name: "path-prefix", Usage: "prefix of the mesh and status paths, when the Ingress routes a path (e.g. /mesh/pod-a)"}),
		tokenFileFlag(),
		withEnv(&cli.StringFlag{Name: "private-key-file", Usage: "the sidecar's WireGuard private key (from 'meshlaunch keygen'), for explicit peers instead of keys derived from the secret"}),
		withEnv(&cli.StringSliceFlag{Name: "peer", Usage: "explicit peer PUBKEY[=ADDR] (repeat; with --private-key-file; ADDR defaults to the pod IP for a single peer)"}),
		withEnv(&cli.StringFlag{Name: "pod-ip", Usage: "the pod's IPv4 address, which the job takes (default: $POD_IP from the downward API, else the pod's first global address)"}, "POD_IP"),
		withEnv(&cli.StringFlag{Name: "service-addr", Value: "169.254.64.1", Usage: "in-tunnel address of DNS and the launcher's config API"}),
		withEnv(&cli.StringSliceFlag{Name: "route", Usage: "CIDR the job sends through the mesh (repeat; cluster pod and Service ranges; 0.0.0.0/0 for all egress through the pod)"}),
		withEnv(&cli.StringSliceFlag{Name: "expose", Usage: "pod port forwarded to the job, PORT[/tcp|/udp] (repeat)"}),
		withEnv(&cli.StringSliceFlag{Name: "allow", Usage: "only these destinations, CIDR[:PORTS] (repeat; e.g. 10.96.0.0/12, 10.0.0.0/8:80,443,8000-8999)"}),
		withEnv(&cli.StringSliceFlag{Name: "deny", Usage: "never these destinations, CIDR[:PORTS] (repeat; wins over --allow)"}),
		withEnv(&cli.StringFlag{Name: "resolv-conf", Value: "/etc/resolv.conf", Usage: "the pod's resolver file; DNS in the tunnel forwards to its nameservers"}),
		withEnv(&cli.IntFlag{Name: "mtu", Value: netstack.DefaultMTU, Usage: "inner MTU of the tunnel (1280-65000); the carrier is a TCP stream, so large is fast"}),
		withEnv(&cli.DurationFlag{Name: "shutdown-grace", Value: 25 * time.Second, Usage: "how long established flows may drain after SIGTERM"}),
		withEnv(&cli.DurationFlag{Name: "dial-timeout", Value: netstack.DefaultDialTimeout, Usage: "egress dial timeout; the job gets a RST after it"}),
		withEnv(&cli.IntFlag{Name: "max-dials", Value: netstack.DefaultMaxInFlight, Usage: "egress dials in progress at once, all peers"}),
		withEnv(&cli.IntFlag{Name: "max-dials-per-peer", Value: netstack.DefaultMaxInFlightPerSource, Usage: "egress dials in progress at once, per peer"}),
		withEnv(&cli.IntFlag{Name: "max-flows", Value: netstack.DefaultMaxFlows, Usage: "established egress TCP flows and UDP sessions, all peers"}),
		withEnv(&cli.IntFlag{Name: "max-flows-per-peer", Value: netstack.DefaultMaxFlowsPerSource, Usage: "established egress TCP flows and UDP sessions, per peer"}),
		withEnv(&cli.IntFlag{Name: "tcp-buffer-mib", Value: netstack.DefaultBufferBudget >> 20, Usage: "MiB that the TCP buffers of all flows share (n flows get at most this/2n each way, at least 32 KiB send and 128 KiB receive); raise it with the pod's memory limit for many concurrent bulk flows over long round trips"}),
		withEnv(&cli.DurationFlag{Name: "udp-idle-timeout", Value: netstack.DefaultUDPIdleTimeout, Usage: "egress UDP sessions idle this long are closed"}),
		withEnv(&cli.IntFlag{Name: "max-ingress", Value: 4096, Usage: "concurrent ingress connections and UDP sessions"}),
		pprofFlag(),
	}
}

func (a *app) runSidecar(ctx context.Context, cmd *cli.Command) error {
	if err := noArgs(cmd); err != nil {
		return err
	}
	cfg, err := sidecarConfig(cmd)
	if err != nil {
		return err
	}
	cfg.Logger, cfg.Version = a.log, buildVersion()
	sc, err := sidecar.New(cfg)
	if err != nil {
		return usageError{err}
	}
	ln, err := listen(cmd.String("listen"), cmd.String("tls-cert"), cmd.String("tls-key"))
	if err != nil {
		return err
	}
	stopPprof, err := a.startPprof(ctx, cmd)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopPprof()
	return sc.Serve(ctx, ln)
}

// sidecarConfig turns flags into sidecar.Config; errors are usage errors
// that name the flag.
func sidecarConfig(cmd *cli.Command) (sidecar.Config, error) {
	secret, err := readSecret(cmd)
	if err != nil {
		return sidecar.Config{}, err
	}
	cfg := sidecar.Config{
		Secret:        secret,
		PathPrefix:    cmd.String("path-prefix"),
		ResolvConf:    cmd.String("resolv-conf"),
		MTU:           int(cmd.Int("mtu")),
		ShutdownGrace: cmd.Duration("shutdown-grace"),
		MaxIngress:    int(cmd.Int("max-ingress")),
		Limits: netstack.ForwarderConfig{
			DialTimeout:          cmd.Duration("dial-timeout"),
			MaxInFlight:          int(cmd.Int("max-dials")),
			MaxInFlightPerSource: int(cmd.Int("max-dials-per-peer")),
			MaxFlows:             int(cmd.Int("max-flows")),
			MaxFlowsPerSource:    int(cmd.Int("max-flows-per-peer")),
			UDPIdleTimeout:       cmd.Duration("udp-idle-timeout"),
		},
	}
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	cfg.TCPBufferBudget, err = tcpBufferBudget(cmd.Int("tcp-buffer-mib"))
	collect(err)
	if _, port, err := net.SplitHostPort(cmd.String("listen")); err == nil {
		if n, err := strconv.ParseUint(port, 10, 16); err == nil {
			cfg.ListenPort = uint16(n)
		}
	}
	cfg.PodIP, err = podIP(cmd.String("pod-ip"))
	collect(err)
	cfg.ServiceAddr, err = parseAddrFlag("service-addr", cmd.String("service-addr"))
	collect(err)
	cfg.Routes, err = parsePrefixes("route", cmd.StringSlice("route"))
	collect(err)
	for _, s := range cmd.StringSlice("expose") {
		p, err := sidecar.ParsePort(s)
		collect(flagErr("expose", err))
		cfg.Expose = append(cfg.Expose, p)
	}
	cfg.PrivateKey, err = readPrivateKey(cmd.String("private-key-file"))
	collect(err)
	for _, spec := range cmd.StringSlice("peer") {
		p, err := sidecar.ParsePeer(spec)
		collect(flagErr("peer", err))
		cfg.Peers = append(cfg.Peers, p)
	}
	cfg.Allow, err = policy.ParseRules(mergePortLists(cmd.StringSlice("allow")))
	collect(flagErr("allow", err))
	cfg.Deny, err = policy.ParseRules(mergePortLists(cmd.StringSlice("deny")))
	collect(flagErr("deny", err))
	if len(errs) > 0 {
		return cfg, usageError{errors.Join(errs...)}
	}
	return cfg, nil
}

func flagErr(flag string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--%s: %w", flag, err)
}

func parseAddrFlag(flag, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, fmt.Errorf("--%s %q: not an IP address", flag, s)
	}
	return a, nil
}

func parsePrefixes(flag string, specs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range specs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: want a CIDR such as 10.96.0.0/12", flag, s)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("--%s %q: host bits set; did you mean %s?", flag, s, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// podIP is --pod-ip (or $POD_IP), else the first global IPv4 address.
func podIP(s string) (netip.Addr, error) {
	if s != "" {
		return parseAddrFlag("pod-ip", s)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--pod-ip not set and the pod's addresses are unreadable: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && ip.IsGlobalUnicast() {
				return ip.Unmap(), nil
			}
		}
	}
	return netip.Addr{}, errors.New("--pod-ip not set, $POD_IP empty, and the pod has no global IPv4 address")
}

// listen opens the HTTP listener, with TLS when a certificate is given.
func listen(addr, certFile, keyFile string) (net.Listener, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, usageErrorf("--tls-cert and --tls-key go together")
	}
	var tlsCfg *tls.Config
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, usageErrorf("load --tls-cert/--tls-key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}

// tcpBufferBudget is --tcp-buffer-mib in bytes.
func tcpBufferBudget(mib int) (int, error) {
	if mib < 1 || mib > maxTCPBufferMiB {
		return 0, fmt.Errorf("--tcp-buffer-mib %d: want 1..%d (MiB shared by the TCP buffers of all flows)", mib, maxTCPBufferMiB)
	}
	return mib << 20, nil
}

// maxTCPBufferMiB bounds --tcp-buffer-mib: 64 GiB, far above any pod.
const maxTCPBufferMiB = 64 << 10

// jobKeyFlag is a launcher's own WireGuard key, for a sidecar with
// explicit peers.
func jobKeyFlag() cli.Flag {
	return withEnv(&cli.StringFlag{Name: "private-key-file", Usage: "this job's WireGuard private key (from 'meshlaunch keygen'), for a sidecar with explicit peers: its public key must be one of the sidecar's --peer"})
}

// readPrivateKey reads a base64 WireGuard key from path; "" is no key.
func readPrivateKey(path string) (identity.PrivateKey, error) {
	if path == "" {
		return identity.PrivateKey{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return identity.PrivateKey{}, fmt.Errorf("--private-key-file: %w", err)
	}
	k, err := identity.ParsePrivateKey(string(b))
	if err != nil {
		return identity.PrivateKey{}, fmt.Errorf("--private-key-file %s: %w", path, err)
	}
	return k, nil
}
