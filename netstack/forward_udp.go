package netstack

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// udpBufSize holds the largest datagram either side can deliver.
const udpBufSize = 64 << 10

var udpBufs = sync.Pool{New: func() any { b := make([]byte, udpBufSize); return &b }}

// handleUDP serves the first datagram of a new 4-tuple, on the packet path.
// It admits the flow and creates the inner endpoint at once, so later
// datagrams of the 4-tuple queue in it while the session dials on an owned
// goroutine. A refused flow's datagram is dropped.
func (f *forwarder) handleUDP(r *udp.ForwarderRequest) {
	fl := flowOf("udp", r.ID())
	t, _ := f.admit(fl, true)
	if t == nil {
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		t.release()
		f.s.log.Debug("netstack: create udp endpoint", "src", fl.Src, "dst", fl.Dst, "err", convertError(terr))
		return
	}
	inner := gonet.NewUDPConn(&wq, ep)
	if !f.s.goOwned(func() { f.runUDP(t, fl, inner) }) {
		inner.Close()
		t.release()
	}
}

// runUDP dials the session's outer side and relays until the session idles
// out, fails or the stack closes.
func (f *forwarder) runUDP(t *ticket, fl Flow, inner net.Conn) {
	defer t.release()
	outer, ok := f.dial(t, fl)
	if !ok {
		inner.Close()
		return
	}
	f.s.stats.udpAccepted.Add(1)
	f.s.stats.udpActive.Add(1)
	defer f.s.stats.udpActive.Add(-1)
	ss := newUDPSession(inner, outer, f.cfg.UDPIdleTimeout)
	untrack := f.s.track(inner, outer)
	defer untrack()
	done := make(chan struct{})
	if !f.s.goOwned(func() {
		defer close(done)
		ss.relay(inner, outer, &f.s.stats.bytesOut)
	}) {
		ss.close()
		return
	}
	ss.relay(outer, inner, &f.s.stats.bytesIn)
	<-done
}

// udpSession is one forwarded UDP 4-tuple. Both relays share the time of the
// last datagram in either direction; the session ends when neither saw one
// for idle.
type udpSession struct {
	inner, outer net.Conn
	idle         time.Duration
	last         atomic.Int64 // unix nanoseconds of the last datagram
	closeOnce    sync.Once
}

func newUDPSession(inner, outer net.Conn, idle time.Duration) *udpSession {
	ss := &udpSession{inner: inner, outer: outer, idle: idle}
	ss.touch()
	return ss
}

func (ss *udpSession) touch() { ss.last.Store(time.Now().UnixNano()) }

// expiry is when the session idles out unless a datagram arrives.
func (ss *udpSession) expiry() time.Time {
	return time.Unix(0, ss.last.Load()).Add(ss.idle)
}

// close ends the session; it unblocks both relays.
func (ss *udpSession) close() {
	ss.closeOnce.Do(func() {
		ss.inner.Close()
		ss.outer.Close()
	})
}

// relay copies datagrams src -> dst until the session ends. The read
// deadline is moved only when it fires, not per datagram.
func (ss *udpSession) relay(dst, src net.Conn, n *atomic.Uint64) {
	defer ss.close()
	bp := udpBufs.Get().(*[]byte)
	defer udpBufs.Put(bp)
	buf := *bp
	src.SetReadDeadline(ss.expiry())
	for {
		m, err := src.Read(buf)
		if err != nil {
			if !ss.keepGoing(src, err) {
				return
			}
			continue
		}
		ss.touch()
		if _, err := dst.Write(buf[:m]); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a datagram lost is a datagram lost
		}
		n.Add(uint64(m))
	}
}

// keepGoing decides after a read error: a deadline that fired before the
// session's expiry is moved on, an ICMP error reported by a connected socket
// is ignored, anything else ends the session.
func (ss *udpSession) keepGoing(src net.Conn, err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		exp := ss.expiry()
		if !time.Now().Before(exp) {
			return false
		}
		src.SetReadDeadline(exp)
		return true
	case errors.Is(err, syscall.ECONNREFUSED):
		return true
	}
	return false
}
