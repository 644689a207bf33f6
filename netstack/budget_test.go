package netstack

import (
	"bytes"
	"io"
	"math/bits"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// newEndpoints makes n unconnected TCP endpoints on s, closed at cleanup.
func newEndpoints(t *testing.T, s *Stack, n int) []tcpip.Endpoint {
	t.Helper()
	eps := make([]tcpip.Endpoint, n)
	for i := range eps {
		var wq waiter.Queue
		ep, terr := s.ip.NewEndpoint(tcp.ProtocolNumber, protoOf(clientAddr), &wq)
		if terr != nil {
			t.Fatal(convertError(terr))
		}
		eps[i] = ep
		t.Cleanup(ep.Close)
	}
	return eps
}

// wantLimits is what the budget promises each of n endpoints: the share
// of n rounded up to a power of two, 0 (auto-tuning) at or above the
// auto-tuning maximum, else at least the floor.
func wantLimits(budget, n int) bufLimits {
	share := budget / (2 << bits.Len(uint(n-1)))
	lim := func(floor, ceiling int) int {
		if share >= ceiling {
			return 0
		}
		return max(share, floor)
	}
	return bufLimits{snd: lim(sndFloor, tcpSendBufMax), rcv: lim(rcvFloor, tcpRecvBufMax)}
}

// sizes reads an endpoint's send and receive buffer sizes.
func sizes(ep tcpip.Endpoint) bufLimits {
	o := ep.SocketOptions()
	return bufLimits{snd: int(o.GetSendBufferSize()), rcv: int(o.GetReceiveBufferSize())}
}

// With n endpoints each gets budget/(2n) each way within the floors; the
// first ones are left to gVisor's auto-tuning (the stack's defaults stay);
// opening 1,000 walks the endpoints once per change of the limits, at
// most once per power of two; closing all but one gives the survivor the
// auto-tuning maxima back.
func TestBufferBudgetSplitsAmongEndpoints(t *testing.T) {
	s := newStack(t, clientAddr)
	eps := newEndpoints(t, s, 1000)
	for i, ep := range eps {
		s.budget.add(ep)
		n, lim, _ := s.budget.state()
		if want := wantLimits(DefaultBufferBudget, i+1); n != i+1 || lim != want {
			t.Fatalf("after %d endpoints: %d counted, limits %+v, want %+v", i+1, n, lim, want)
		}
	}
	if got := sizes(eps[0]); got != (bufLimits{snd: sndFloor, rcv: rcvFloor}) {
		t.Errorf("first endpoint with 1,000: buffers %+v, want the floors", got)
	}
	_, _, walks := s.budget.state()
	if walks == 0 || walks > bits.Len(1000) {
		t.Errorf("opening 1,000 endpoints walked them %d times, want 1..%d", walks, bits.Len(1000))
	}

	untouched := newStack(t, clientAddr) // positive control: a stack's defaults
	fresh := newEndpoints(t, untouched, 1)[0]
	untouched.budget.add(fresh)
	if got, want := sizes(fresh), (bufLimits{snd: tcpSendBufDefault, rcv: tcpRecvBufDefault}); got != want {
		t.Errorf("a lone endpoint's buffers: %+v, want the stack's defaults %+v", got, want)
	}

	for _, ep := range eps[1:] {
		s.budget.remove(ep)
	}
	n, lim, _ := s.budget.state()
	if n != 1 || lim != (bufLimits{}) {
		t.Fatalf("after closing all but 1: %d counted, limits %+v, want auto-tuning", n, lim)
	}
	if got, want := sizes(eps[0]), (bufLimits{snd: tcpSendBufMax, rcv: tcpRecvBufMax}); got != want {
		t.Errorf("a survivor's buffers: %+v, want the auto-tuning maxima %+v", got, want)
	}
}

// Flows opening and closing around a power of two do not walk the
// endpoints each time: crossing it upwards does once (the positive
// control), going back and forth across it then does not.
func TestBufferBudgetHysteresis(t *testing.T) {
	s := newStack(t, clientAddr)
	eps := newEndpoints(t, s, 17)
	for _, ep := range eps[:16] {
		s.budget.add(ep)
	}
	_, lim16, before := s.budget.state()
	s.budget.add(eps[16])
	_, lim17, crossed := s.budget.state()
	if crossed != before+1 || lim17 == lim16 {
		t.Fatalf("16 -> 17 endpoints: walks %d -> %d, limits %+v -> %+v; want one walk and smaller limits",
			before, crossed, lim16, lim17)
	}
	for range 100 {
		s.budget.remove(eps[16])
		s.budget.add(eps[16])
	}
	if _, _, walks := s.budget.state(); walks != crossed {
		t.Errorf("100 rounds of 17 -> 16 -> 17 endpoints walked them %d more times, want 0", walks-crossed)
	}
}

// Every TCP conn a stack hands out is counted until it is closed: dialled
// and accepted conns and the inner side of forwarded flows.
func TestBufferBudgetCountsEveryConn(t *testing.T) {
	p := newPair(t, ForwarderConfig{})
	ln, err := p.router.ListenTCP(netip.AddrPortFrom(routerAddr, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialled, err := p.client.DialTCP(testCtx(t, 10*time.Second), netip.AddrPort{}, netip.AddrPortFrom(routerAddr, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer dialled.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	port := server(t, echo)
	fwd, err := p.client.DialTCP(testCtx(t, 10*time.Second), netip.AddrPort{}, dst(port))
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	counted := func(s *Stack) int { n, _, _ := s.budget.state(); return n }
	eventually(t, 5*time.Second, "the forwarded flow to be counted", func() bool { return counted(p.router) == 2 })
	if n := counted(p.client); n != 2 {
		t.Errorf("client stack counts %d conns, want 2 (two dialled)", n)
	}
	dialled.Close()
	accepted.Close()
	fwd.Close()
	eventually(t, 5*time.Second, "closed conns to leave the budget", func() bool {
		return counted(p.client) == 0 && counted(p.router) == 0
	})
}

// A limit that shrinks below what an endpoint has queued loses no data:
// the writer waits until the queue drains under the new limit and the
// reader gets every byte in order.
func TestBufferBudgetShrinkKeepsQueuedData(t *testing.T) {
	a, b := newStack(t, clientAddr), newStack(t, routerAddr)
	connect(t, a, b)
	ln, err := b.ListenTCP(netip.AddrPortFrom(routerAddr, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := a.DialTCP(testCtx(t, 10*time.Second), netip.AddrPort{}, netip.AddrPortFrom(routerAddr, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ac, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	sender := ac.(*tcpConn).ep

	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	var written atomic.Int64
	wrote := make(chan error, 1)
	go func() {
		for p := data; len(p) > 0; p = p[16<<10:] {
			if _, err := ac.Write(p[:16<<10]); err != nil {
				wrote <- err
				return
			}
			written.Add(16 << 10)
		}
		wrote <- nil
	}()
	// What the sender wrote and the reader's stack has not queued is in the
	// sender's send buffer.
	reader := c.(*tcpConn).ep
	held := func() int64 {
		v, _ := reader.GetSockOptInt(tcpip.ReceiveQueueSizeOption)
		return written.Load() - int64(v)
	}
	eventually(t, 10*time.Second, "the sender to hold more than 2 floors", func() bool { return held() > 2*sndFloor })

	for _, ep := range newEndpoints(t, b, 511) {
		b.budget.add(ep)
		defer b.budget.remove(ep)
	}
	if got := sizes(sender).snd; got != sndFloor {
		t.Fatalf("sender's send buffer with 512 endpoints: %d, want the floor %d", got, sndFloor)
	}
	t.Logf("the sender held %d bytes when its send buffer shrank to %d", held(), sndFloor)

	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the reader got different bytes")
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
}
