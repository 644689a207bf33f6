package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlaunch/meshlaunch/dnsproxy"
	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/policy"
	"github.com/meshlaunch/meshlaunch/tunnel"
	"github.com/meshlaunch/meshlaunch/wgdev"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// Sidecar is one shadow pod's mesh end. Build it with New, run it with Serve.
type Sidecar struct {
	cfg     Config
	log     *slog.Logger
	id      identity.Identity
	policy  *policy.Policy
	resolv  dnsproxy.ResolvConf
	stack   *netstack.Stack
	server  *wsproxy.Server
	dev     *wgdev.Device
	dns     *dnsproxy.Forwarder
	tunnel  *tunnel.Server
	ingress *ingress
	started time.Time
	// peers are the WireGuard peers: the one derived from the secret, or
	// the explicit ones; byAddr finds a peer by its mesh address.
	peers  []Peer
	byAddr map[netip.Addr]Peer
	auth   *peerAuth

	stopServices context.CancelFunc // ends the in-tunnel services

	ready        atomic.Bool
	draining     atomic.Bool
	apiAuthFails atomic.Uint64  // refusals on /v1/status and /v1/config
	wg           sync.WaitGroup // in-tunnel services and ingress listeners
}

// New validates cfg and builds the sidecar: the netstack, the WireGuard
// device and the in-tunnel services. Nothing listens on the pod yet.
func New(cfg Config) (*Sidecar, error) {
	if err := cfg.normalize(); err != nil {
		return nil, fmt.Errorf("sidecar: configuration: %w", err)
	}
	rc, err := dnsproxy.ReadResolvConf(cfg.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("sidecar: pod resolvers: %w", err)
	}
	id, _ := identity.Derive(cfg.Secret) // checked by normalize
	s := &Sidecar{cfg: cfg, log: cfg.Logger, id: id, resolv: rc, started: time.Now()}
	s.setPeers()
	s.policy = policy.New(policy.Config{
		Allow: cfg.Allow, Deny: cfg.Deny,
		Self:  []netip.Addr{cfg.PodIP, cfg.ServiceAddr},
		Peers: s.peerPrefixes(),
	})
	if err := s.build(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sidecar) build() error {
	st, err := netstack.New(netstack.Config{Addrs: []netip.Addr{s.cfg.ServiceAddr}, MTU: s.cfg.MTU, BufferBudget: s.cfg.TCPBufferBudget, Logger: s.log})
	if err != nil {
		return fmt.Errorf("sidecar: netstack: %w", err)
	}
	if err := st.Forward(s.forwarderConfig()); err != nil {
		st.Close()
		return fmt.Errorf("sidecar: egress forwarder: %w", err)
	}
	srv, err := wsproxy.NewServer(wsproxy.ServerConfig{
		Auth:   s.auth,
		MTU:    s.cfg.MTU,
		Logger: s.log,
	})
	if err != nil {
		st.Close()
		return fmt.Errorf("sidecar: websocket server: %w", err)
	}
	dev, err := wgdev.New(st, srv, s.deviceConfig())
	if err != nil {
		return fmt.Errorf("sidecar: wireguard: %w", err) // wgdev closed the stack
	}
	dns, err := dnsproxy.New(dnsproxy.Config{Upstreams: upstreams(s.resolv), Logger: s.log})
	if err != nil {
		dev.Close()
		return fmt.Errorf("sidecar: dns: %w", err)
	}
	s.stack, s.server, s.dev, s.dns = st, srv, dev, dns
	s.ingress = newIngress(st, s.ingressTarget(), s.cfg.ServiceAddr, s.cfg.MaxIngress, s.log)
	s.ingress.reachable = func() bool { return srv.Stats().Sessions > 0 }
	if s.tunnel, err = s.newTunnel(); err != nil {
		dev.Close()
		return err
	}
	return nil
}

func upstreams(rc dnsproxy.ResolvConf) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(rc.Nameservers))
	for _, a := range rc.Nameservers {
		out = append(out, netip.AddrPortFrom(a, 53))
	}
	return out
}

// Serve runs the sidecar on ln until ctx ends, then shuts down: it turns
// not ready, stops taking websocket sessions, ingress connections and new
// egress flows, lets established flows drain for up to ShutdownGrace
// (the tunnel stays up meanwhile, or they could not drain), closes every
// websocket with 1001 so launchers reconnect to a replacement, and
// returns nil. Serve closes ln.
func (s *Sidecar) Serve(ctx context.Context, ln net.Listener) error {
	defer s.dev.Close()
	if err := s.startServices(); err != nil {
		ln.Close()
		s.stopTunnelServices()
		s.wg.Wait()
		return err
	}
	hs := s.httpServer()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.ready.Store(true)
	s.log.Info("sidecar ready", "listen", ln.Addr().String(), "pod_ip", s.cfg.PodIP,
		"service_addr", s.cfg.ServiceAddr, "routes", s.cfg.Routes, "expose", s.cfg.Expose)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("sidecar: http: %w", err)
	}
	s.shutdown(hs)
	if err == nil {
		<-errc // http.ErrServerClosed
	}
	return err
}

// startServices starts DNS and the config API inside the tunnel and the
// ingress listeners on the pod.
func (s *Sidecar) startServices() error {
	if err := s.startTunnelServices(); err != nil {
		return err
	}
	for _, p := range s.cfg.Expose {
		if err := s.ingress.listen(p); err != nil {
			s.ingress.close()
			return fmt.Errorf("sidecar: expose %s: %w", p, err)
		}
	}
	return nil
}

func (s *Sidecar) shutdown(hs *http.Server) {
	s.log.Info("shutting down", "grace", s.cfg.ShutdownGrace)
	s.ready.Store(false)
	s.draining.Store(true)
	s.ingress.close()
	s.tunnel.StopReverse()
	hs.SetKeepAlivesEnabled(false)
	s.drain(s.cfg.ShutdownGrace)
	s.ingress.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.server.Shutdown(ctx); err != nil {
		s.log.Warn("websocket sessions did not close in time", "err", err)
	}
	if err := s.tunnel.Shutdown(ctx); err != nil {
		s.log.Warn("tunnel websockets did not close in time", "err", err)
	}
	if err := hs.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("http shutdown", "err", err)
	}
	hs.Close()
	s.stopTunnelServices()
	s.wg.Wait()
	s.log.Info("sidecar stopped")
}

// drain waits until no forwarded or ingress flow is left, or grace ends.
func (s *Sidecar) drain(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for {
		st := s.stack.Stats()
		active := st.TCPActive + st.InFlight + s.ingress.active() + s.tunnel.Stats().OpenStreams
		if active == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.log.Warn("grace period over; closing flows still open", "flows", active)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
