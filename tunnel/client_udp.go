package tunnel

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"time"
)

// udpMux keeps the client's UDP sessions: one websocket per key (a local
// client address, or a SOCKS destination), created on the first datagram
// and gone after the idle timeout.
type udpMux struct {
	c        *Client
	mu       sync.Mutex
	sessions map[string]*dgramSession
}

func newUDPMux(c *Client) *udpMux {
	return &udpMux{c: c, sessions: map[string]*dgramSession{}}
}

// send offers p to the session under key, opening it (to dst, delivering
// replies with deliver) on a goroutine in wg if there is none.
func (m *udpMux) send(ctx context.Context, wg *sync.WaitGroup, key, dst string, deliver func([]byte), p []byte) {
	m.mu.Lock()
	s := m.sessions[key]
	if s == nil {
		s = newDgramSession(m.c.cfg.UDPIdle, m.c.ka, deliver)
		m.sessions[key] = s
		wg.Go(func() {
			m.c.runUDPSession(ctx, s, dst)
			m.mu.Lock()
			delete(m.sessions, key)
			m.mu.Unlock()
		})
	}
	m.mu.Unlock()
	s.offer(p)
}

// failedSessionHold keeps a refused UDP session for a while, so a client
// that keeps sending does not open a websocket per datagram.
const failedSessionHold = time.Second

func (c *Client) runUDPSession(ctx context.Context, s *dgramSession, dst string) {
	ws, err := c.dial(ctx, PathUDP, url.Values{"dst": {dst}})
	if err != nil {
		c.logRefused("udp", dst, err)
		t := time.NewTimer(failedSessionHold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return
	}
	s.run(ctx, ws)
}

// udpForward is a -L UDP listener: one session per local client address.
type udpForward struct {
	c   *Client
	dst string
	pc  *net.UDPConn
	mux *udpMux
}

func newUDPForward(c *Client, f Forward, pc *net.UDPConn) *udpForward {
	return &udpForward{c: c, dst: f.dst(), pc: pc, mux: newUDPMux(c)}
}

func (u *udpForward) close() { _ = u.pc.Close() }

func (u *udpForward) serve(ctx context.Context, wg *sync.WaitGroup) {
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := u.pc.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		deliver := func(p []byte) { _, _ = u.pc.WriteToUDPAddrPort(p, from) }
		u.mux.send(ctx, wg, addrKey(from), u.dst, deliver, buf[:n])
	}
}

func addrKey(a netip.AddrPort) string { return a.String() }
