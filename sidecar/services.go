package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/meshapi"
)

// startTunnelServices serves DNS (UDP and TCP port 53) and the config API
// (HTTP port 80) on the service address inside the tunnel.
func (s *Sidecar) startTunnelServices() error {
	ctx, cancel := context.WithCancel(context.Background()) // alive until stopTunnelServices
	s.stopServices = cancel
	dnsAddr := netip.AddrPortFrom(s.cfg.ServiceAddr, 53)
	pc, err := s.stack.ListenUDP(dnsAddr)
	if err != nil {
		return fmt.Errorf("sidecar: dns on %s: %w", dnsAddr, err)
	}
	dl, err := s.stack.ListenTCP(dnsAddr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("sidecar: dns on %s: %w", dnsAddr, err)
	}
	api := netip.AddrPortFrom(s.cfg.ServiceAddr, 80)
	al, err := s.stack.ListenTCP(api)
	if err != nil {
		pc.Close()
		dl.Close()
		return fmt.Errorf("sidecar: config API on %s: %w", api, err)
	}
	s.wg.Go(func() { s.logServe("dns/udp", s.dns.ServeUDP(ctx, pc)) })
	s.wg.Go(func() { s.logServe("dns/tcp", s.dns.ServeTCP(ctx, dl)) })
	s.wg.Go(func() { s.serveConfigAPI(ctx, al) })
	return nil
}

func (s *Sidecar) stopTunnelServices() {
	if s.stopServices != nil {
		s.stopServices()
	}
}

func (s *Sidecar) logServe(what string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed) {
		s.log.Warn("in-tunnel service stopped", "service", what, "err", err)
	}
}

func (s *Sidecar) serveConfigAPI(ctx context.Context, ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+meshapi.ConfigPath, func(w http.ResponseWriter, r *http.Request) {
		// WireGuard's cryptokey routing vouches for the source address:
		// it is the asking peer's own.
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			http.Error(w, "bad remote address", http.StatusBadRequest)
			return
		}
		writeJSON(w, s.jobConfig(ap.Addr().Unmap()))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second}
	stop := context.AfterFunc(ctx, func() { hs.Close() })
	defer stop()
	err := hs.Serve(ln)
	if !errors.Is(err, http.ErrServerClosed) {
		s.logServe("config-api", err)
	}
}

// serveListenerConfig answers a launcher before its tunnel exists. The
// peer is the derived one, or the explicit peer its header names.
func (s *Sidecar) serveListenerConfig(w http.ResponseWriter, r *http.Request) {
	addr := s.peers[0].Addr
	if s.auth.explicit {
		pk, err := identity.ParsePublicKey(r.Header.Get(PeerHeader))
		if err != nil {
			http.Error(w, "explicit peers: name yours in the "+PeerHeader+" header", http.StatusBadRequest)
			return
		}
		addr = netip.Addr{}
		for _, p := range s.peers {
			if p.PublicKey == pk {
				addr = p.Addr
			}
		}
		if !addr.IsValid() {
			http.Error(w, "unknown peer", http.StatusForbidden)
			return
		}
	}
	writeJSON(w, s.jobConfig(addr))
}

// jobConfig is what the launcher needs beyond the URL and the secret.
func (s *Sidecar) jobConfig(peer netip.Addr) meshapi.JobConfig {
	expose := make([]string, 0, len(s.cfg.Expose))
	for _, p := range s.cfg.Expose {
		expose = append(expose, p.String())
	}
	return meshapi.JobConfig{
		Address:     peer,
		Routes:      s.cfg.Routes,
		MTU:         s.cfg.MTU,
		ServiceAddr: s.cfg.ServiceAddr,
		SidecarKey:  s.privateKey().Public().String(),
		Expose:      expose,
		DNS: meshapi.DNSConfig{
			Nameserver: s.cfg.ServiceAddr,
			Search:     s.resolv.Search,
			Ndots:      s.resolv.Ndots,
			Options:    s.resolv.Options,
		},
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
