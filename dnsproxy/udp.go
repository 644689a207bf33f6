package dnsproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

var udpTransport = transport{network: "udp", exchange: exchangeUDP}

// ServeUDP answers queries on pc until ctx ends or pc fails; each query is
// forwarded on its own upstream socket (a new UDP socket per query gives
// source-port randomisation), bounded by MaxInFlight; the reply is validated
// (parses as a DNS message, ID and question match the query) before it is
// sent back.
//
// ServeUDP owns pc: it closes pc when ctx ends and before it returns. It
// returns after every goroutine it started has finished: nil when ctx ended,
// otherwise the error that made reading pc fail.
func (f *Forwarder) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWatch := closeWhenDone(ctx, pc)
	var wg sync.WaitGroup
	err := f.readUDP(ctx, pc, &wg)
	cancel() // aborts in-flight queries and closes pc
	stopWatch()
	wg.Wait()
	return err
}

// readUDP reads queries from pc and starts a goroutine in wg for each one
// admitted.
func (f *Forwarder) readUDP(ctx context.Context, pc net.PacketConn, wg *sync.WaitGroup) error {
	buf := make([]byte, maxMsgSize)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dnsproxy: serve udp: %w", err)
		}
		q, ok := f.parse(buf[:n], from)
		if !ok || !f.acquire(from) {
			continue
		}
		q.raw = bytes.Clone(q.raw)
		wg.Go(func() {
			defer f.release()
			f.answerUDP(ctx, pc, from, q)
		})
	}
}

// answerUDP forwards q and sends the reply to the client at to.
func (f *Forwarder) answerUDP(ctx context.Context, pc net.PacketConn, to net.Addr, q query) {
	reply, answered := f.resolve(ctx, q, udpTransport)
	if reply == nil {
		return
	}
	f.count(answered) // before the send, so a client that has its reply sees it counted
	if _, err := pc.WriteTo(reply, to); err != nil {
		f.log.Debug("dnsproxy: send udp reply", "to", to, "err", err)
	}
}

// bufPool holds maxMsgSize buffers for upstream UDP reads.
var bufPool = sync.Pool{New: func() any { return new([maxMsgSize]byte) }}

// exchangeUDP sends q on the connected UDP socket c and returns the first
// valid reply; invalid replies are ignored until c's deadline or close.
func exchangeUDP(c net.Conn, q query) ([]byte, error) {
	if _, err := c.Write(q.raw); err != nil {
		return nil, err
	}
	buf := bufPool.Get().(*[maxMsgSize]byte)
	defer bufPool.Put(buf)
	var ignored error
	for {
		n, err := c.Read(buf[:])
		if err != nil {
			return nil, errors.Join(err, ignored)
		}
		if ignored = checkReply(q, buf[:n]); ignored == nil {
			return bytes.Clone(buf[:n]), nil
		}
	}
}
