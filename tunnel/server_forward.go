package tunnel

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// dialContext bounds a destination dial by the timeout, the client's
// request (a client that hangs up cancels the dial) and the server's life.
func (s *Server) dialContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.DialTimeout)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// dialFirst takes a connection slot and dials the request's dst before
// any upgrade, so every failure is an HTTP status the client can print; on
// failure it has answered and released the slot. On success the caller
// owns c and release.
func (s *Server) dialFirst(w http.ResponseWriter, r *http.Request, network string) (c net.Conn, release func(), ok bool) {
	d, err := parseDst(r.URL.Query().Get("dst"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, nil, false
	}
	if release, ok = s.reserve(w, r); !ok {
		return nil, nil, false
	}
	ctx, cancel := s.dialContext(r)
	c, err = s.dialDst(ctx, network, d)
	cancel()
	if err != nil {
		release()
		s.refuse(w, network, d, err)
		return nil, nil, false
	}
	return c, release, true
}

// serveTCP dials the destination first and upgrades only once it answered.
func (s *Server) serveTCP(w http.ResponseWriter, r *http.Request) {
	c, release, ok := s.dialFirst(w, r, "tcp")
	if !ok {
		return
	}
	tc, ok := c.(localConn)
	if !ok {
		release()
		c.Close()
		http.Error(w, "dialer returned a connection without half-close", http.StatusInternalServerError)
		return
	}
	ws, ok := s.accept(w, r, release)
	if !ok {
		c.Close()
		return
	}
	defer release()
	s.counters.streams.Add(1)
	s.counters.open.Add(1)
	up, down := splice(s.ctx, ws, tc, s.ka)
	s.counters.open.Add(-1)
	s.counters.bytesUp.Add(uint64(up))
	s.counters.bytesDown.Add(uint64(down))
}

// serveUDP dials a connected UDP socket and relays datagrams until the
// session is idle, the client leaves or the server shuts down.
func (s *Server) serveUDP(w http.ResponseWriter, r *http.Request) {
	c, release, ok := s.dialFirst(w, r, "udp")
	if !ok {
		return
	}
	defer c.Close()
	ws, ok := s.accept(w, r, release)
	if !ok {
		return
	}
	defer release()
	s.counters.udp.Add(1)
	sess := newDgramSession(s.cfg.UDPIdle, s.ka, func(p []byte) { _, _ = c.Write(p) })
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.Close() // ends readConn
	wg.Go(func() { readConn(c, sess) })
	sess.run(s.ctx, ws)
}

// readConn offers every datagram read from c to sess until c is closed.
func readConn(c net.Conn, sess *dgramSession) {
	buf := make([]byte, maxDatagram)
	for {
		n, err := c.Read(buf)
		switch {
		case err == nil:
			sess.offer(buf[:n])
		case errors.Is(err, syscall.ECONNREFUSED):
			// An ICMP port unreachable for an earlier datagram.
		default:
			return
		}
	}
}
