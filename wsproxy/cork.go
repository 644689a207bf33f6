package wsproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/coder/websocket"
)

// A Corker makes one websocket message reach the socket as one write.
//
// coder/websocket masks a client's frames through a 4 KiB bufio.Writer, so
// a 64 KiB message leaves as sixteen writes: sixteen syscalls, and under
// TLS sixteen records each flushed on its own. Between Cork and Uncork
// the connection under the websocket (below TLS) collects those writes;
// Uncork sends them in one. Control frames written meanwhile by other
// goroutines (pongs, pings) join the batch and leave with it.
//
// Cork and Uncork are safe for concurrent use; every Cork must be followed
// by an Uncork. Uncork returns the error of the write it made, which
// also fails every later write on the connection.
type Corker interface {
	Cork()
	Uncork() error
}

// NoCork is the Corker of a websocket whose connection is not corkable.
var NoCork Corker = noCork{}

type noCork struct{}

func (noCork) Cork()         {}
func (noCork) Uncork() error { return nil }

// maxCorked bounds what a corked connection holds before it writes anyway:
// a little over the largest message (64 KiB) with its TLS records.
const maxCorked = 96 << 10

var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, maxCorked); return &b }}

// corkConn is a net.Conn whose writes are held while it is corked.
type corkConn struct {
	net.Conn

	mu     sync.Mutex // held across the connection's writes, to keep order
	corked int
	held   *[]byte // nil unless corked writes are waiting
	err    error   // a failed write of held bytes; the connection is broken
}

func newCorkConn(c net.Conn) *corkConn { return &corkConn{Conn: c} }

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.corked == 0 {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		return c.Conn.Write(p)
	}
	if c.held == nil {
		c.held = corkBufs.Get().(*[]byte)
	}
	if len(*c.held)+len(p) > maxCorked {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > maxCorked {
			return c.Conn.Write(p)
		}
		c.held = corkBufs.Get().(*[]byte)
	}
	*c.held = append(*c.held, p...)
	return len(p), nil
}

func (c *corkConn) Cork() {
	c.mu.Lock()
	c.corked++
	c.mu.Unlock()
}

// Uncork writes what is held, even while another writer still has the
// connection corked: a message is never held longer than its own write.
func (c *corkConn) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked > 0 {
		c.corked--
	}
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if c.held == nil {
		return c.err
	}
	b := c.held
	c.held = nil
	_, err := c.Conn.Write(*b)
	*b = (*b)[:0]
	corkBufs.Put(b)
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("wsproxy: write corked data: %w", err)
	}
	return c.err
}

// corkSlot carries a dial's corkConn from the HTTP transport's dialer
// back to Dial, through the request's context.
type corkSlot struct{ c *corkConn }

type corkSlotKey struct{}

// corkDialer wraps every connection dial opens in a corkConn and hands it
// to the Dial that asked for it.
func corkDialer(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := newCorkConn(c)
		if s, ok := ctx.Value(corkSlotKey{}).(*corkSlot); ok {
			s.c = cc
		}
		return cc, nil
	}
}

// Dial is websocket.Dial that also returns the Corker of the new
// connection. The options' HTTPClient must come from NewHTTPClient for the
// Corker to work; with any other client it is NoCork.
func Dial(ctx context.Context, u string, opts *websocket.DialOptions) (*websocket.Conn, Corker, *http.Response, error) {
	slot := &corkSlot{}
	ws, resp, err := websocket.Dial(context.WithValue(ctx, corkSlotKey{}, slot), u, opts)
	if err != nil {
		return nil, nil, resp, err
	}
	if slot.c == nil {
		return ws, NoCork, resp, nil
	}
	return ws, slot.c, resp, nil
}

// uncorkedMax is the largest message the library already writes in one
// piece: its 4 KiB buffer less the longest frame header (14 bytes with a
// mask). Smaller messages (ACKs, handshakes, most datagrams) skip the cork.
const uncorkedMax = 4096 - 14

// WriteCorked writes p as one message of type typ through cork.
func WriteCorked(ctx context.Context, ws *websocket.Conn, cork Corker, typ websocket.MessageType, p []byte) error {
	if len(p) <= uncorkedMax {
		return ws.Write(ctx, typ, p)
	}
	cork.Cork()
	err := ws.Write(ctx, typ, p)
	if uerr := cork.Uncork(); err == nil {
		err = uerr
	}
	return err
}

// Accept is websocket.Accept that also returns the Corker of the accepted
// connection. A server's frames are not masked, but the library still
// writes a message larger than its 4 KiB buffer in two parts; corked, it
// leaves in one.
func Accept(w http.ResponseWriter, r *http.Request, opts *websocket.AcceptOptions) (*websocket.Conn, Corker, error) {
	cw := &corkHijacker{ResponseWriter: w}
	ws, err := websocket.Accept(cw, r, opts)
	if err != nil {
		return nil, nil, err
	}
	if cw.c == nil {
		return ws, NoCork, nil
	}
	return ws, cw.c, nil
}

// corkHijacker hands the websocket library a corkConn when it hijacks.
type corkHijacker struct {
	http.ResponseWriter
	c *corkConn
}

func (h *corkHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("wsproxy: accept: the response writer cannot be hijacked")
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("wsproxy: accept: flush the upgrade response: %w", err)
	}
	h.c = newCorkConn(conn)
	return h.c, bufio.NewReadWriter(brw.Reader, bufio.NewWriter(h.c)), nil
}
