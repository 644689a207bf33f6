package tunnel

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// reverseUDP serves a -R UDP control websocket: each pod client address
// gets its own connected socket to the local service, so the service sees
// one peer per pod client; replies go back with the same address header.
type reverseUDP struct {
	c  *Client
	f  Forward
	ws *wsConn

	mu    sync.Mutex
	peers map[netip.AddrPort]*udpPeer
	wg    sync.WaitGroup // one reader per peer
}

type udpPeer struct {
	conn net.Conn
	last atomic.Int64 // unix nanos
}

func newReverseUDP(c *Client, f Forward, ws *wsConn) *reverseUDP {
	ws.SetReadLimit(addrHeaderLen + maxDatagram)
	return &reverseUDP{c: c, f: f, ws: ws, peers: map[netip.AddrPort]*udpPeer{}}
}

// readLoop delivers the pod's datagrams until ws is closed.
func (r *reverseUDP) readLoop(ctx context.Context) error {
	for {
		typ, msg, err := r.ws.Read(context.Background()) // ends when ws is closed
		if err != nil {
			return err
		}
		from, payload, err := splitAddrHeader(msg)
		if typ != websocket.MessageBinary || err != nil {
			continue
		}
		if p := r.peer(ctx, from); p != nil {
			p.last.Store(time.Now().UnixNano())
			_, _ = p.conn.Write(payload)
		}
	}
}

// peer returns the local socket for a pod client, opening it if needed.
func (r *reverseUDP) peer(ctx context.Context, from netip.AddrPort) *udpPeer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.peers[from]; p != nil {
		return p
	}
	conn, err := net.Dial("udp", r.f.dst())
	if err != nil {
		r.c.log.Warn("tunnel: reverse udp: local service unreachable", "dst", r.f.dst(), "err", err)
		return nil
	}
	p := &udpPeer{conn: conn}
	p.last.Store(time.Now().UnixNano())
	r.peers[from] = p
	r.wg.Go(func() { r.replies(ctx, from, p) })
	return p
}

// replies sends the local service's datagrams for from back to the pod.
func (r *reverseUDP) replies(ctx context.Context, from netip.AddrPort, p *udpPeer) {
	buf := make([]byte, addrHeaderLen+maxDatagram)
	appendAddrHeader(buf[:0], from)
	for {
		n, err := p.conn.Read(buf[addrHeaderLen:])
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue // an ICMP port unreachable for an earlier datagram
		}
		if err != nil {
			return
		}
		p.last.Store(time.Now().UnixNano())
		if writeMessage(ctx, r.ws, r.c.ka, websocket.MessageBinary, buf[:addrHeaderLen+n]) != nil {
			return
		}
	}
}

// expireLoop closes sockets of pod clients idle for UDPIdle.
func (r *reverseUDP) expireLoop(ctx context.Context) {
	t := time.NewTicker(max(r.c.cfg.UDPIdle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.expire(time.Now().Add(-r.c.cfg.UDPIdle))
		}
	}
}

func (r *reverseUDP) expire(before time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, p := range r.peers {
		if time.Unix(0, p.last.Load()).Before(before) {
			_ = p.conn.Close()
			delete(r.peers, a)
		}
	}
}

// close closes every local socket and waits for their readers.
func (r *reverseUDP) close() {
	r.mu.Lock()
	for a, p := range r.peers {
		_ = p.conn.Close()
		delete(r.peers, a)
	}
	r.mu.Unlock()
	r.wg.Wait()
}
