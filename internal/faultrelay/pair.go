package faultrelay

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// pair is one relayed connection: the client's and, once dialled, the
// target's side.
type pair struct {
	ctx    context.Context // ends when the pair is reset or the relay closes
	cancel context.CancelFunc
	client net.Conn
	held   OutageMode  // made during an outage: never relayed; 0 otherwise
	silent atomic.Bool // blackholed: data read is discarded, ends not passed on

	mu     sync.Mutex
	server net.Conn // nil until dialled
	gone   bool     // reset: a server dialled later is reset at once
}

func newPair(parent context.Context, c net.Conn) *pair {
	p := &pair{client: c}
	p.ctx, p.cancel = context.WithCancel(parent)
	return p
}

// serve relays p until both directions end, then closes both sides.
func (r *Relay) serve(p *pair) {
	defer r.remove(p)
	defer p.close()
	switch p.held {
	case RefuseNew:
		p.reset()
		return
	case BlackholeNew:
		_, _ = io.Copy(io.Discard, p.client)
		return
	}
	dctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	s, err := r.cfg.Dial(dctx, "tcp", r.cfg.Target)
	cancel()
	if err != nil {
		return // the client sees its connection closed
	}
	if !p.setServer(s) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.pipe(p, Up, s, p.client) })
	wg.Go(func() { r.pipe(p, Down, p.client, s) })
	wg.Wait()
}

// setServer records the dialled side; it reports false (and resets s) if
// the pair was reset meanwhile.
func (p *pair) setServer(s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		resetConn(s)
		return false
	}
	p.server = s
	return true
}

// reset closes both sides with a RST and stops the pair's pipes.
func (p *pair) reset() {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone = true
	resetConn(p.client)
	if p.server != nil {
		resetConn(p.server)
	}
}

func (p *pair) close() {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.client.Close()
	if p.server != nil {
		p.server.Close()
	}
}

// endWrite passes the end of one direction on to dst: a FIN for a FIN,
// a close for anything else; a blackholed pair passes nothing on.
func (p *pair) endWrite(dst net.Conn, err error) {
	if p.silent.Load() {
		return
	}
	if errors.Is(err, io.EOF) {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			return
		}
	}
	dst.Close()
}

// resetConn closes c with a RST instead of a FIN where it can.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
