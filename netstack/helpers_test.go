package netstack

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	clientAddr = netip.MustParseAddr("10.99.0.2")
	routerAddr = netip.MustParseAddr("10.99.0.1")
	// testNet is the benchmark range the client dials; the test dialer maps
	// it to 127.0.0.1 so real traffic only ever goes to loopback.
	testNet = netip.MustParsePrefix("198.18.0.0/15")
	testDst = netip.MustParseAddr("198.18.0.10")
)

// dst is the in-tunnel test destination for a loopback port.
func dst(port uint16) netip.AddrPort { return netip.AddrPortFrom(testDst, port) }

// newStack builds a Stack closed at cleanup.
func newStack(tb testing.TB, addrs ...netip.Addr) *Stack {
	tb.Helper()
	s, err := New(Config{Addrs: addrs})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// connect pumps packets between a and b in both directions, standing in for
// WireGuard. At cleanup it closes both stacks and waits for the pumps.
func connect(tb testing.TB, a, b *Stack) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pump(a, b) }()
	go func() { defer wg.Done(); pump(b, a) }()
	tb.Cleanup(func() {
		a.Close()
		b.Close()
		wg.Wait()
	})
}

// pump moves packets from one stack's Read to the other's Write until
// either closes. It uses a nonzero offset like wireguard-go.
func pump(from, to *Stack) {
	const off = 16
	n := from.BatchSize()
	bufs, out, sizes := make([][]byte, n), make([][]byte, n), make([]int, n)
	for i := range bufs {
		bufs[i] = make([]byte, off+maxMTU)
	}
	for {
		k, err := from.Read(bufs, sizes, off)
		if err != nil {
			return
		}
		for i := range k {
			out[i] = bufs[i][:off+sizes[i]]
		}
		if _, err := to.Write(out[:k], off); err != nil {
			return
		}
	}
}

// loopback maps testNet destinations to 127.0.0.1 and refuses any other, so
// tests never send traffic anywhere but loopback.
func loopback(d Dialer) Dialer {
	return func(ctx context.Context, f Flow) (net.Conn, error) {
		if !testNet.Contains(f.Dst.Addr()) {
			return nil, errors.New("test dialer: destination outside the test range")
		}
		f.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), f.Dst.Port())
		return d(ctx, f)
	}
}

// pair is a client stack connected to a router stack that forwards.
type pair struct {
	client, router *Stack
}

// newPair builds the client and the router, connects them and installs the
// router's forwarder (cfg.Dial defaults to loopback(NetDialer(nil))).
func newPair(tb testing.TB, cfg ForwarderConfig) *pair {
	tb.Helper()
	p := &pair{client: newStack(tb, clientAddr), router: newStack(tb, routerAddr)}
	if cfg.Dial == nil {
		cfg.Dial = loopback(NetDialer(nil))
	}
	if err := p.router.Forward(cfg); err != nil {
		tb.Fatal(err)
	}
	connect(tb, p.client, p.router)
	return p
}

// server runs a loopback TCP server whose handler gets each conn; at cleanup
// it closes the listener and every conn and waits for the handlers.
func server(tb testing.TB, handle func(net.Conn)) uint16 {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); handle(c) }()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// echo copies a conn back to itself and then half-closes it.
func echo(c net.Conn) {
	io.Copy(c, c)
	c.(*net.TCPConn).CloseWrite()
}

// udpServer runs a loopback UDP server; reply decides what to send back
// (nil: nothing). It is closed at cleanup.
func udpServer(tb testing.TB, reply func([]byte) []byte) uint16 {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if r := reply(buf[:n]); r != nil {
				pc.WriteTo(r, from)
			}
		}
	}()
	tb.Cleanup(func() { pc.Close(); <-done })
	return uint16(pc.LocalAddr().(*net.UDPAddr).Port)
}

// closedPort returns a loopback TCP port nobody listens on.
func closedPort(tb testing.TB) uint16 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	return port
}

// eventually polls cond until it holds or d passes.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testCtx is a context bounded by d and cancelled at cleanup.
func testCtx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
