package tunnel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// errReplaced ends a registration whose port was registered again.
var errReplaced = errors.New("tunnel: reverse port registered again")

// reverseReg is one live -R registration: a pod listener and the control
// websocket of the client that owns it.
type reverseReg struct {
	port   Port
	ctx    context.Context // alive until the registration ends
	cancel context.CancelCauseFunc
	once   sync.Once
	ln     io.Closer // net.Listener or net.PacketConn

	// release gives the port back to its owner (ServerConfig.Claim); it is
	// moved to a registration that replaces this one. Guarded by regMu.
	release func()
}

// closeListener frees the pod port at once; it is idempotent.
func (r *reverseReg) closeListener() { r.once.Do(func() { _ = r.ln.Close() }) }

func parseReverseQuery(q url.Values) (Port, error) {
	n, err := strconv.ParseUint(q.Get("port"), 10, 16)
	if err != nil || n == 0 {
		return Port{}, fmt.Errorf("port %q: want 1-65535", q.Get("port"))
	}
	proto := cmpOrString(q.Get("proto"), "tcp")
	if proto != "tcp" && proto != "udp" {
		return Port{}, fmt.Errorf("proto %q: want tcp or udp", proto)
	}
	return Port{Num: uint16(n), Proto: proto}, nil
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// notAllowed is the 403 body for a port outside ReversePorts.
func (s *Server) notAllowed(p Port) string {
	if len(s.cfg.ReversePorts) == 0 {
		return fmt.Sprintf("pod port %v is not exposed for -R: the sidecar exposes no ports (start it with --expose PORT[/udp])", p)
	}
	names := make([]string, len(s.cfg.ReversePorts))
	for i, a := range s.cfg.ReversePorts {
		names[i] = a.String()
	}
	return fmt.Sprintf("pod port %v is not exposed for -R; allowed: %s", p, strings.Join(names, ", "))
}

// serveReverse registers a pod port: it listens first (failures are HTTP
// errors), replacing an older registration of the same port, then
// upgrades and serves the control websocket.
func (s *Server) serveReverse(w http.ResponseWriter, r *http.Request) {
	p, err := parseReverseQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	stopped := s.noReverse
	s.mu.Unlock()
	if stopped {
		http.Error(w, "the sidecar is shutting down", http.StatusServiceUnavailable)
		return
	}
	if !slices.Contains(s.cfg.ReversePorts, p) {
		s.counters.denied.Add(1)
		http.Error(w, s.notAllowed(p), http.StatusForbidden)
		return
	}
	reg, ws, release, ok := s.register(w, r, p)
	if !ok {
		return
	}
	defer release()
	defer s.unregister(reg)
	defer reg.cancel(nil)
	s.counters.reverse.Add(1)
	s.log.Info("tunnel: reverse port registered", "port", p.String(), "remote", r.RemoteAddr)
	if p.Proto == "tcp" {
		s.runReverseTCP(reg.ctx, reg, ws)
	} else {
		s.runReverseUDP(reg.ctx, reg, ws)
	}
}

// register replaces any older registration of p, listens and upgrades.
func (s *Server) register(w http.ResponseWriter, r *http.Request, p Port) (*reverseReg, *wsConn, func(), bool) {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.mu.Lock()
	old := s.reverse[p]
	s.mu.Unlock()
	var giveBack func()
	if old != nil {
		old.cancel(errReplaced)
		old.closeListener()
		giveBack, old.release = old.release, nil
	} else if s.cfg.Claim != nil {
		var err error
		if giveBack, err = s.cfg.Claim(p); err != nil {
			http.Error(w, fmt.Sprintf("pod port %v: %v", p, err), http.StatusConflict)
			return nil, nil, nil, false
		}
	}
	fail := func() {
		if giveBack != nil {
			giveBack()
		}
	}
	ln, err := s.listen(p)
	if err != nil {
		fail()
		http.Error(w, fmt.Sprintf("listen on pod port %v: %v", p, err), http.StatusBadGateway)
		return nil, nil, nil, false
	}
	ws, release, ok := s.upgrade(w, r)
	if !ok {
		ln.Close()
		fail()
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithCancelCause(s.ctx)
	reg := &reverseReg{port: p, ln: ln, ctx: ctx, cancel: cancel, release: giveBack}
	s.mu.Lock()
	s.reverse[p] = reg
	s.mu.Unlock()
	return reg, ws, release, true
}

func (s *Server) unregister(reg *reverseReg) {
	reg.closeListener()
	s.regMu.Lock()
	giveBack := reg.release
	reg.release = nil
	s.regMu.Unlock()
	s.mu.Lock()
	if s.reverse[reg.port] == reg {
		delete(s.reverse, reg.port)
	}
	s.mu.Unlock()
	if giveBack != nil {
		giveBack()
	}
}

func (s *Server) listen(p Port) (io.Closer, error) {
	addr := net.JoinHostPort(s.cfg.ReverseHost, strconv.Itoa(int(p.Num)))
	var lc net.ListenConfig
	if p.Proto == "udp" {
		return lc.ListenPacket(s.ctx, "udp", addr)
	}
	return lc.Listen(s.ctx, "tcp", addr)
}

// closeControl closes a control websocket with a code that says why.
func closeControl(ws *wsConn, cause error) {
	switch {
	case errors.Is(cause, errReplaced):
		_ = ws.Close(StatusReplaced, "port registered again")
	case errors.Is(cause, context.Canceled):
		_ = ws.Close(websocket.StatusGoingAway, "shutting down")
	default:
		_ = ws.CloseNow()
	}
}

// runReverseTCP announces each pod connection on ws until the
// registration ends; the client claims it on PathAccept.
func (s *Server) runReverseTCP(ctx context.Context, reg *reverseReg, ws *wsConn) {
	ln := reg.ln.(net.Listener)
	cancel := reg.cancel
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				cancel(fmt.Errorf("tunnel: accept: %w", err))
				return
			}
			if err := s.announce(ctx, ws, c); err != nil {
				cancel(err)
				return
			}
		}
	})
	wg.Go(func() { cancel(drainControl(ws)) })
	wg.Go(func() { cancel(pingLoop(ctx, ws, s.ka, nil)) })
	<-ctx.Done()
	reg.closeListener()
	closeControl(ws, context.Cause(ctx))
	wg.Wait()
}

// drainControl reads a TCP control websocket, on which the client sends
// nothing, so pongs and the close frame are processed.
func drainControl(ws *wsConn) error {
	for {
		if _, _, err := ws.Read(context.Background()); err != nil { // ends when ws is closed
			return err
		}
	}
}

// announce parks c as a pending connection and tells the client.
func (s *Server) announce(ctx context.Context, ws *wsConn, c net.Conn) error {
	id := newID()
	msg, _ := json.Marshal(controlMsg{ID: id, Client: c.RemoteAddr().String(), Server: c.LocalAddr().String()})
	if !s.addPending(id, c) {
		return nil
	}
	if err := writeMessage(ctx, ws, s.ka, websocket.MessageText, msg); err != nil {
		if p := s.takePending(id); p != nil {
			p.drop()
		}
		return fmt.Errorf("tunnel: announce: %w", err)
	}
	return nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
