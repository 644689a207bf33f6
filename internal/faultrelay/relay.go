// Package faultrelay is a TCP relay for tests that puts faults between a
// client and a server: it can reset every connection through it (a
// websocket torn down mid-transfer) or blackhole them (no FIN, no data).
//
// A Relay owns one accept goroutine and two copy goroutines per
// connection; Close stops and waits for all of them.
package faultrelay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Relay forwards TCP connections from its listener to a target address.
type Relay struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[*pair]struct{}
	closed   bool
	accepted atomic.Int64
	wg       sync.WaitGroup
}

type pair struct {
	client, server net.Conn
	silent         atomic.Bool // blackholed: data read is discarded
}

// New listens on 127.0.0.1 (a free port) and relays to target.
func New(target string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultrelay: listen: %w", err)
	}
	r := &Relay{ln: ln, target: target, conns: map[*pair]struct{}{}}
	r.wg.Go(r.acceptLoop)
	return r, nil
}

// Addr is the relay's listening address (host:port).
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Accepted is how many client connections the relay has taken.
func (r *Relay) Accepted() int64 { return r.accepted.Load() }

// Reset closes every current connection with a TCP RST on both sides.
func (r *Relay) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.conns {
		p.reset()
	}
}

// Blackhole silences every current connection for good: data is read and
// discarded in both directions and nothing is closed, like a path that
// drops every packet. Connections made later are relayed normally.
func (r *Relay) Blackhole() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.conns {
		p.silent.Store(true)
	}
}

// Close stops accepting, resets every connection and waits for the
// relay's goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	err := r.ln.Close()
	r.Reset()
	r.wg.Wait()
	return err
}

func (r *Relay) acceptLoop() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.accepted.Add(1)
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		p := &pair{client: c, server: s}
		if !r.add(p) {
			p.reset()
			return
		}
		r.wg.Go(func() { r.serve(p) })
	}
}

func (r *Relay) add(p *pair) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[p] = struct{}{}
	return true
}

func (r *Relay) serve(p *pair) {
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(p.server, p.client) })
	wg.Go(func() { p.copy(p.client, p.server) })
	wg.Wait()
	r.mu.Lock()
	delete(r.conns, p)
	r.mu.Unlock()
	p.client.Close()
	p.server.Close()
}

// copy relays src to dst; once silenced, what it reads is discarded.
func (p *pair) copy(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				return
			}
			dst.Close()
			return
		}
	}
}

func (p *pair) reset() {
	for _, c := range []net.Conn{p.client, p.server} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST
		}
		c.Close()
	}
}

// WaitAccepted blocks until the relay has accepted n connections or ctx ends.
func (r *Relay) WaitAccepted(ctx context.Context, n int64) error {
	for r.accepted.Load() < n {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("faultrelay: waiting for %d connections (have %d): %w", n, r.accepted.Load(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
