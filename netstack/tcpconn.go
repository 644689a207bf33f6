package netstack

import (
	"net"
	"net/netip"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/waiter"
)

// tcpConn is a connected endpoint counted in the stack's buffer budget
// until it is closed. It keeps gonet.TCPConn's methods (CloseWrite,
// CloseRead, deadlines).
type tcpConn struct {
	*gonet.TCPConn
	ep     tcpip.Endpoint
	budget *bufBudget
	once   sync.Once
}

// newTCPConn wraps a connected endpoint and counts it in the budget.
func (s *Stack) newTCPConn(wq *waiter.Queue, ep tcpip.Endpoint) net.Conn {
	s.budget.add(ep)
	return &tcpConn{TCPConn: gonet.NewTCPConn(wq, ep), ep: ep, budget: s.budget}
}

// Close leaves the budget and closes the endpoint.
func (c *tcpConn) Close() error {
	c.once.Do(func() { c.budget.remove(c.ep) })
	return c.TCPConn.Close()
}

// tcpListener is ListenTCP's net.Listener; the conns it accepts are
// counted in the buffer budget.
type tcpListener struct {
	s         *Stack
	ep        tcpip.Endpoint
	wq        *waiter.Queue
	closed    chan struct{}
	closeOnce sync.Once
}

// Accept waits for the next connection. After Close it returns an error
// matching net.ErrClosed.
func (l *tcpListener) Accept() (net.Conn, error) {
	entry, notify := waiter.NewChannelEntry(waiter.ReadableEvents)
	l.wq.EventRegister(&entry)
	defer l.wq.EventUnregister(&entry)
	for {
		ep, wq, terr := l.ep.Accept(nil)
		if terr == nil {
			return l.s.newTCPConn(wq, ep), nil
		}
		if _, again := terr.(*tcpip.ErrWouldBlock); !again {
			return nil, l.opError(convertError(terr))
		}
		select {
		case <-l.closed:
			return nil, l.opError(net.ErrClosed)
		case <-notify:
		}
	}
}

func (l *tcpListener) opError(err error) error {
	select {
	case <-l.closed:
		err = net.ErrClosed
	default:
	}
	return &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: err}
}

// Close closes the listening endpoint and unblocks Accept.
func (l *tcpListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.ep.Close()
	})
	return nil
}

// Addr is the listening address.
func (l *tcpListener) Addr() net.Addr {
	a, terr := l.ep.GetLocalAddress()
	if terr != nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(fromTCPIPAddr(a.Addr), a.Port))
}
