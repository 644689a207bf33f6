package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
	"time"

	"github.com/urfave/cli/v3"
)

const flagPprofAddr = "pprof-addr"

// pprofFlag is --pprof-addr of sidecar, run and tunnel.
func pprofFlag() cli.Flag {
	return withEnv(&cli.StringFlag{
		Name: flagPprofAddr,
		Usage: "for profiling only: serve Go's net/http/pprof handlers (/debug/pprof/) on this loopback " +
			"address, e.g. 127.0.0.1:6060, on a listener of their own; off by default. They have no " +
			"authentication, so only loopback addresses are accepted",
	})
}

// startPprof serves net/http/pprof on the loopback address of --pprof-addr,
// if set, until the returned stop is called; stop closes the listener and
// the connections, and returns once the server and its handlers are done.
// Call it before the command's real work starts, so that a refused
// address fails the command at once, and defer stop. The server lives
// as long as the command, not ctx: only its values are used.
func (a *app) startPprof(ctx context.Context, cmd *cli.Command) (stop func(), err error) {
	addr := cmd.String(flagPprofAddr)
	if addr == "" {
		return func() {}, nil
	}
	if err := checkPprofAddr(addr); err != nil {
		return nil, usageError{err}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: listen on %s: %w", flagPprofAddr, addr, err)
	}
	a.log.Info("serving pprof profiles; for profiling only", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	return servePprof(context.WithoutCancel(ctx), ln, a.log), nil
}

// checkPprofAddr accepts HOST:PORT with HOST a loopback IP address.
func checkPprofAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--%s %q (or $%s): want a loopback HOST:PORT such as 127.0.0.1:6060: %w",
			flagPprofAddr, addr, envName(flagPprofAddr), err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return fmt.Errorf("--%s %q (or $%s): not a loopback address; the profiling endpoint has no "+
			"authentication, so it listens on loopback only: use 127.0.0.1:PORT or [::1]:PORT and "+
			"fetch the profiles from the same host (or network namespace)",
			flagPprofAddr, addr, envName(flagPprofAddr))
	}
	return nil
}

// pprofMux routes the net/http/pprof handlers; nothing else is served.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// servePprof serves pprofMux on ln until stop is called. Requests carry a
// context that stop cancels, so a profile being taken ends early.
func servePprof(ctx context.Context, ln net.Listener, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	h := &trackedHandler{next: pprofMux()}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return func() {
		cancel()
		_ = srv.Close() // closes ln and every connection; Serve returns
		<-done
		h.closeAndWait()
	}
}

// trackedHandler counts the requests in progress, so that the server's
// owner can wait for them; after closeAndWait it refuses new ones.
type trackedHandler struct {
	next     http.Handler
	mu       sync.Mutex
	closed   bool
	inFlight sync.WaitGroup
}

func (h *trackedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	h.inFlight.Add(1)
	h.mu.Unlock()
	defer h.inFlight.Done()
	h.next.ServeHTTP(w, r)
}

func (h *trackedHandler) closeAndWait() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.inFlight.Wait()
}
