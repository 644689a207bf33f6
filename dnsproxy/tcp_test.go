package dnsproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestForwardTCP(t *testing.T) {
	up := startUpstream(t, upstreamOpts{})
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}})
	c := tcpDial(t, s.tcpAddr)

	for id := range uint16(3) { // several queries on one connection
		if err := writeMsg(c, newQuery(t, id, webName, dnsmessage.TypeA)); err != nil {
			t.Fatal(err)
		}
		msg, err := readMsg(c)
		if err != nil {
			t.Fatal(err)
		}
		wantWeb(t, msg, id)
	}
	if up.tcpQueries.Load() != 3 || up.udpQueries.Load() != 0 {
		t.Errorf("upstream saw %d TCP and %d UDP queries, want 3 TCP", up.tcpQueries.Load(), up.udpQueries.Load())
	}
	if got := s.f.Stats(); got.Queries != 3 || got.Answered != 3 {
		t.Errorf("stats %+v, want 3 queries answered", got)
	}
}

// Pipelined queries on one connection are forwarded concurrently.
func TestTCPPipelined(t *testing.T) {
	const n, delay = 5, 300 * time.Millisecond
	up := startUpstream(t, upstreamOpts{delay: delay})
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}})
	c := tcpDial(t, s.tcpAddr)

	start := time.Now()
	for id := range uint16(n) {
		if err := writeMsg(c, newQuery(t, id, webName, dnsmessage.TypeA)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint16]bool{}
	for range n {
		msg, err := readMsg(c)
		if err != nil {
			t.Fatal(err)
		}
		id := parseReply(t, msg).hdr.ID
		wantWeb(t, msg, id)
		seen[id] = true
	}
	if len(seen) != n {
		t.Errorf("replies for IDs %v, want %d distinct", seen, n)
	}
	if el := time.Since(start); el > n*delay*3/4 {
		t.Errorf("%d pipelined queries took %v: not forwarded concurrently", n, el)
	}
	if up.maxActive.Load() < 2 {
		t.Errorf("upstream saw at most %d concurrent queries, want several", up.maxActive.Load())
	}
}

func TestTCPConnLimit(t *testing.T) {
	up := startUpstream(t, upstreamOpts{})
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}, MaxTCPConns: 1})

	first := tcpDial(t, s.tcpAddr)
	writeMsg(first, newQuery(t, 1, webName, dnsmessage.TypeA))
	if _, err := readMsg(first); err != nil { // it holds the only slot now
		t.Fatal(err)
	}
	second := tcpDial(t, s.tcpAddr)
	if _, err := readMsg(second); !errors.Is(err, io.EOF) {
		t.Fatalf("second connection: %v, want closed", err)
	}
	if got := s.f.Stats().Dropped; got != 1 {
		t.Errorf("Dropped %d, want 1", got)
	}
	first.Close()
	eventually(t, "the slot to be released", func() bool { return len(s.f.conns) == 0 })
	wantWeb(t, ask(t, s, "tcp", newQuery(t, 2, webName, dnsmessage.TypeA)), 2)
}

// Over MaxInFlight a TCP connection is closed, after the replies it is owed.
func TestTCPInFlightLimit(t *testing.T) {
	up := startUpstream(t, upstreamOpts{delay: 200 * time.Millisecond})
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}, MaxInFlight: 1})
	c := tcpDial(t, s.tcpAddr)

	writeMsg(c, newQuery(t, 1, webName, dnsmessage.TypeA))
	writeMsg(c, newQuery(t, 2, webName, dnsmessage.TypeA))
	msg, err := readMsg(c)
	if err != nil {
		t.Fatal(err)
	}
	wantWeb(t, msg, 1)
	if _, err := readMsg(c); !errors.Is(err, io.EOF) {
		t.Fatalf("after the owed reply: %v, want closed", err)
	}
	if got := s.f.Stats(); got.Dropped != 1 || got.Answered != 1 || up.tcpQueries.Load() != 1 {
		t.Errorf("stats %+v, upstream %d queries; want 1 dropped, 1 answered, 1 forwarded", got, up.tcpQueries.Load())
	}
}

func TestTCPIdleTimeout(t *testing.T) {
	up := startUpstream(t, upstreamOpts{})
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}, TCPIdle: 200 * time.Millisecond})
	c := tcpDial(t, s.tcpAddr)
	start := time.Now()
	if _, err := readMsg(c); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: %v, want closed", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > 2*time.Second {
		t.Errorf("closed after %v, want about 200ms", el)
	}
}

// Running out of file descriptors is waited out; any other Accept error
// ends ServeTCP with that error.
func TestAcceptErrors(t *testing.T) {
	up := startUpstream(t, upstreamOpts{})
	f, err := New(Config{Upstreams: []netip.AddrPort{up.addr}})
	if err != nil {
		t.Fatal(err)
	}
	real, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	broken := errors.New("listener broke")
	ln := &flakyListener{Listener: real, errs: []error{emfile, emfile, emfile}, last: broken}
	done := make(chan error, 1)
	go func() { done <- f.ServeTCP(context.Background(), ln) }()

	c := tcpDial(t, real.Addr().String())
	writeMsg(c, newQuery(t, 4, webName, dnsmessage.TypeA))
	msg, err := readMsg(c)
	if err != nil {
		t.Fatalf("after EMFILE: %v", err)
	}
	wantWeb(t, msg, 4)
	ln.breakNow.Store(true)
	tcpDial(t, real.Addr().String()) // wakes Accept
	select {
	case err := <-done:
		if !errors.Is(err, broken) || !strings.HasPrefix(err.Error(), "dnsproxy: serve tcp: ") {
			t.Errorf("ServeTCP = %v, want the wrapped Accept error", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ServeTCP did not return after a fatal Accept error")
	}
}

// flakyListener fails its first Accept calls with errs, and every call with
// last once breakNow is set.
type flakyListener struct {
	net.Listener
	errs     []error
	last     error
	breakNow atomic.Bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err == nil && l.breakNow.Load() {
		c.Close()
		return nil, l.last
	}
	return c, err
}
