// Package faultrelay is a TCP relay for tests that puts faults between a
// client and a server:
//
//   - Reset tears every connection down with a RST (a websocket cut
//     mid-transfer);
//   - Blackhole silences every connection for good: no data, no FIN;
//   - Outage blackholes the current connections and, for a while, every
//     new one too (or resets new ones at once), like a carrier that is
//     down and then comes back: connections made after it work again;
//   - SetShape adds one-way latency, a throttle (a token bucket shared by
//     every connection in that direction, like one link) and slicing into
//     small writes, per direction.
//
// A Relay owns one accept goroutine and, per connection, a serving
// goroutine with a reader and a writer per direction; Close stops and
// waits for all of them.
package faultrelay

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config says where a Relay listens and how it reaches its target.
type Config struct {
	// Target is the address every accepted connection is relayed to.
	Target string
	// Listener, if set, is where the relay accepts; the relay closes it.
	// nil listens on 127.0.0.1 at a free port.
	Listener net.Listener
	// Dial opens the connection to Target; nil uses a net.Dialer. Tests
	// use it to dial from another network namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// dialTimeout bounds the relay's dial of its target.
const dialTimeout = 10 * time.Second

// Relay forwards TCP connections from its listener to a target address.
type Relay struct {
	cfg    Config
	ln     net.Listener
	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	mu      sync.Mutex
	conns   map[*pair]struct{}
	closed  bool
	outage  outage
	wg      sync.WaitGroup
	link    [2]link // per Direction
	accepts atomic.Int64
}

// New listens on 127.0.0.1 (a free port) and relays to target.
func New(target string) (*Relay, error) { return Start(Config{Target: target}) }

// Start starts a relay as cfg says.
func Start(cfg Config) (*Relay, error) {
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("faultrelay: listen: %w", err)
		}
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	r := &Relay{cfg: cfg, ln: ln, conns: map[*pair]struct{}{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for i := range r.link {
		r.link[i].shape.Store(&Shape{})
	}
	r.wg.Go(r.acceptLoop)
	return r, nil
}

// Addr is the relay's listening address (host:port).
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Accepted is how many client connections the relay has taken.
func (r *Relay) Accepted() int64 { return r.accepts.Load() }

// Reset closes every current connection with a TCP RST on both sides.
func (r *Relay) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.conns {
		p.reset()
	}
}

// Blackhole silences every current connection for good: data is read and
// discarded in both directions, data already queued in the relay is
// dropped, and neither a FIN nor an error is passed on, like a path that
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
	r.cancel()
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
		r.accepts.Add(1)
		p := newPair(r.ctx, c)
		if !r.add(p) {
			p.reset()
			return
		}
		r.wg.Go(func() { r.serve(p) })
	}
}

// add registers p, deciding under the lock whether an outage holds it.
func (r *Relay) add(p *pair) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.outage.active(time.Now()) {
		p.held = r.outage.mode
		p.silent.Store(true)
	}
	r.conns[p] = struct{}{}
	return true
}

func (r *Relay) remove(p *pair) {
	r.mu.Lock()
	delete(r.conns, p)
	r.mu.Unlock()
}

// WaitAccepted blocks until the relay has accepted n connections or ctx ends.
func (r *Relay) WaitAccepted(ctx context.Context, n int64) error {
	for r.accepts.Load() < n {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("faultrelay: waiting for %d connections (have %d): %w", n, r.accepts.Load(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
