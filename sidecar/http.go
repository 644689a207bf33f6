package sidecar

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/tunnel"
)

// httpServer serves the pod-facing endpoints. HTTP/1.1 only (websocket
// upgrades need it); header and idle timeouts bound slow clients.
func (s *Sidecar) httpServer() *http.Server {
	p := s.cfg.PathPrefix
	mux := http.NewServeMux()
	mux.Handle(p+meshapi.MeshPath, s.meshHandler())
	mux.Handle(p+tunnel.PathPrefix, s.tunnelHandler())
	mux.Handle("GET "+p+meshapi.StatusPath, s.requireAuth(http.HandlerFunc(s.serveStatus)))
	mux.Handle("GET "+p+meshapi.ConfigPath, s.requireAuth(http.HandlerFunc(s.serveListenerConfig)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.Handle("GET /metrics", s.metricsHandler())
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		// A non-nil empty map keeps HTTP/2 off: upgrades need HTTP/1.1.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
}

// meshHandler refuses new sessions while draining; established ones keep
// their tunnel until the drain ends.
func (s *Sidecar) meshHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			http.Error(w, "sidecar shutting down", http.StatusServiceUnavailable)
			return
		}
		s.server.ServeHTTP(w, r)
	})
}

func (s *Sidecar) serveReady(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// requireAuth serves h only with the credential; refusals are counted
// with the websocket's in meshlaunch_auth_failures_total.
func (s *Sidecar) requireAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.auth.bearer.Authenticate(r); !ok {
			s.apiAuthFails.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
