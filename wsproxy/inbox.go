package wsproxy

import (
	"context"
	"net"
	"sync"

	"golang.zx2c4.com/wireguard/conn"
)

// inboxDepth bounds the datagrams read from websockets but not yet taken by
// the device. A full inbox blocks the readers, which pushes back on the
// websocket's TCP stream instead of dropping.
const inboxDepth = 256

// batchSize is what both Binds report to the device.
const batchSize = 64

// rxPacket is one received datagram in a pooled buffer.
type rxPacket struct {
	buf *[]byte
	n   int
	ep  conn.Endpoint
}

// inbox joins the readers of all websocket sessions to the device's
// receive function. It outlives Bind Close/Open cycles: each Open hands out
// a receive function bound to a fresh "open" channel, closed by Close.
type inbox struct {
	ch   chan rxPacket
	pool sync.Pool

	mu   sync.Mutex
	open chan struct{} // nil while closed
}

func newInbox(limit int) *inbox {
	in := &inbox{ch: make(chan rxPacket, inboxDepth)}
	// One spare byte: a message that fills the buffer exactly still ends
	// with EOF inside it, so the reader is always read to completion.
	in.pool.New = func() any { b := make([]byte, limit+1); return &b }
	return in
}

func (in *inbox) getBuf() *[]byte  { return in.pool.Get().(*[]byte) }
func (in *inbox) putBuf(b *[]byte) { in.pool.Put(b) }

// start arms the inbox and returns the receive function for this Open.
func (in *inbox) start() (conn.ReceiveFunc, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.open != nil {
		return nil, conn.ErrBindAlreadyOpen
	}
	open := make(chan struct{})
	in.open = open
	return func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		return in.receive(open, packets, sizes, eps)
	}, nil
}

// stop makes the current receive function return net.ErrClosed.
func (in *inbox) stop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.open != nil {
		close(in.open)
		in.open = nil
	}
}

// deliver queues one datagram; it blocks while the inbox is full, until
// ctx (the session's) ends. The inbox owns buf from here on.
func (in *inbox) deliver(ctx context.Context, p rxPacket) {
	select {
	case in.ch <- p:
	case <-ctx.Done():
		in.putBuf(p.buf)
	}
}

// receive blocks for one datagram, then takes whatever else is queued, up
// to the batch the device offered.
func (in *inbox) receive(open chan struct{}, packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	var p rxPacket
	select {
	case p = <-in.ch:
	case <-open:
		return 0, net.ErrClosed
	}
	n := 0
	for {
		if p.n <= len(packets[n]) {
			sizes[n] = copy(packets[n], (*p.buf)[:p.n])
			eps[n] = p.ep
			n++
		}
		in.putBuf(p.buf)
		if n == len(packets) {
			return n, nil
		}
		select {
		case p = <-in.ch:
		default:
			return n, nil
		}
	}
}
