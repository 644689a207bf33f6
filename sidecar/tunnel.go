package sidecar

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/meshlaunch/meshlaunch/tunnel"
)

// newTunnel builds the tunnel mode's server (meshlaunch tunnel): the same
// credential, the same destination policy at dial time, and -R on the
// --expose ports, which the mesh ingress lends out while a -R holds them.
func (s *Sidecar) newTunnel() (*tunnel.Server, error) {
	ports := make([]tunnel.Port, 0, len(s.cfg.Expose))
	for _, p := range s.cfg.Expose {
		ports = append(ports, tunnel.Port{Num: p.Num, Proto: p.Proto})
	}
	return tunnel.NewServer(tunnel.ServerConfig{
		Auth:         s.auth.bearer,
		Dial:         s.dialTunnel,
		ReversePorts: ports,
		Claim: func(p tunnel.Port) (func(), error) {
			return s.ingress.claim(Port{Num: p.Num, Proto: p.Proto})
		},
		Resolver:    s.podResolver(),
		DialTimeout: s.cfg.Limits.DialTimeout,
		Logger:      s.log,
	})
}

// dialTunnel dials from the pod after name resolution; the policy is
// checked on the resolved address the kernel connects to, so a name that
// resolves to loopback is refused.
func (s *Sidecar) dialTunnel(ctx context.Context, network, address string) (net.Conn, error) {
	if s.draining.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errDraining}
	}
	d := net.Dialer{Timeout: s.cfg.Limits.DialTimeout, KeepAlive: 30 * time.Second, Control: s.controlDial}
	return d.DialContext(ctx, network, address)
}

// tunnelHandler refuses new tunnel websockets while draining.
func (s *Sidecar) tunnelHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			http.Error(w, "sidecar shutting down", http.StatusServiceUnavailable)
			return
		}
		s.tunnel.ServeHTTP(w, r)
	})
}

// podResolver resolves names with the nameservers of --resolv-conf, the
// same ones the in-tunnel DNS forwards to, so both modes agree. Search
// domains do not apply: a tunnel names its destination fully.
func (s *Sidecar) podResolver() *net.Resolver {
	servers := upstreams(s.resolv)
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			var err error
			for _, ns := range servers {
				var c net.Conn
				if c, err = d.DialContext(ctx, network, ns.String()); err == nil {
					return c, nil
				}
			}
			return nil, err
		},
	}
}
