package tunnel

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// maxUDPClients bounds the reverse UDP reply table before it is pruned.
const maxUDPClients = 4096

// udpClients remembers which pod clients sent datagrams recently: replies
// from the tunnel client go only to them, so -R UDP cannot be used to send
// datagrams from the pod to arbitrary addresses.
type udpClients struct {
	idle time.Duration
	mu   sync.Mutex
	seen map[netip.AddrPort]time.Time
}

func (u *udpClients) mark(a netip.AddrPort) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	if len(u.seen) >= maxUDPClients {
		for k, t := range u.seen {
			if now.Sub(t) > u.idle {
				delete(u.seen, k)
			}
		}
	}
	u.seen[a] = now
}

func (u *udpClients) known(a netip.AddrPort) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.seen[a]
	return ok && time.Since(t) <= u.idle
}

// runReverseUDP carries the pod port's datagrams on ws, each prefixed by
// the pod client's address; replies carry the same header.
func (s *Server) runReverseUDP(ctx context.Context, reg *reverseReg, ws *wsConn) {
	ws.SetReadLimit(addrHeaderLen + maxDatagram)
	pc := reg.ln.(*net.UDPConn)
	clients := &udpClients{idle: s.cfg.UDPIdle, seen: map[netip.AddrPort]time.Time{}}
	cancel := reg.cancel
	var wg sync.WaitGroup
	wg.Go(func() { cancel(s.podToControl(ctx, pc, ws, clients)) })
	wg.Go(func() { cancel(controlToPod(ws, pc, clients)) })
	wg.Go(func() { cancel(pingLoop(ctx, ws, s.ka, nil)) })
	<-ctx.Done()
	reg.closeListener()
	closeControl(ws, context.Cause(ctx))
	wg.Wait()
}

func (s *Server) podToControl(ctx context.Context, pc *net.UDPConn, ws *wsConn, clients *udpClients) error {
	buf := make([]byte, addrHeaderLen+maxDatagram)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf[addrHeaderLen:])
		if err != nil {
			return fmt.Errorf("tunnel: read pod udp: %w", err)
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		clients.mark(from)
		appendAddrHeader(buf[:0], from)
		if err := writeMessage(ctx, ws, s.ka, websocket.MessageBinary, buf[:addrHeaderLen+n]); err != nil {
			return err
		}
	}
}

func controlToPod(ws *wsConn, pc *net.UDPConn, clients *udpClients) error {
	for {
		typ, msg, err := ws.Read(context.Background()) // ends when ws is closed
		if err != nil {
			return err
		}
		if typ != websocket.MessageBinary {
			continue
		}
		to, payload, err := splitAddrHeader(msg)
		if err != nil || !clients.known(to) {
			continue
		}
		_, _ = pc.WriteToUDPAddrPort(payload, to)
	}
}
