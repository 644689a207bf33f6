package netstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestTCPForwardEcho pushes 50 concurrent 1 MiB flows through the forwarder
// to a loopback echo server and checks every byte and the counters.
func TestTCPForwardEcho(t *testing.T) {
	p := newPair(t, ForwarderConfig{})
	port := server(t, echo)
	const flows, size = 50, 1 << 20
	ctx := testCtx(t, 2*time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, flows)
	for i := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := echoRoundTrip(ctx, p.client, dst(port), size); err != nil {
				errs <- fmt.Errorf("flow %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := p.router.Stats()
	if st.TCPAccepted != flows {
		t.Errorf("TCPAccepted = %d, want %d", st.TCPAccepted, flows)
	}
	eventually(t, 5*time.Second, "TCPActive to drop to 0", func() bool { return p.router.Stats().TCPActive == 0 })
	st = p.router.Stats()
	if want := uint64(flows * size); st.BytesIn != want || st.BytesOut != want {
		t.Errorf("BytesIn, BytesOut = %d, %d, want %d each", st.BytesIn, st.BytesOut, want)
	}
	if len(st.Denied) != 0 {
		t.Errorf("Denied = %v, want none", st.Denied)
	}
}

// echoRoundTrip sends size random bytes, half-closes and expects them back.
func echoRoundTrip(ctx context.Context, s *Stack, to netip.AddrPort, size int) error {
	c, err := s.DialContext(ctx, "tcp", to.String())
	if err != nil {
		return err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	want := make([]byte, size)
	rand.Read(want)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err := errors.Join(err, <-werr); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("echo mismatch: got %d bytes, want %d", len(got), len(want))
	}
	return nil
}

// TestTCPForwardHalfClose checks that the client's CloseWrite reaches the
// server as EOF while the server can still answer.
func TestTCPForwardHalfClose(t *testing.T) {
	p := newPair(t, ForwarderConfig{})
	port := server(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, c) // returns only at EOF
		if err != nil {
			return
		}
		fmt.Fprintf(c, "got %d bytes", n)
	})
	c, err := p.client.DialContext(testCtx(t, 10*time.Second), "tcp", dst(port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(make([]byte, 12345)); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "got 12345 bytes" {
		t.Fatalf("reply = %q, want %q", got, "got 12345 bytes")
	}
}

// TestTCPForwardRefused checks that a refused backend becomes a RST: the
// client sees ECONNREFUSED long before DialTimeout.
func TestTCPForwardRefused(t *testing.T) {
	p := newPair(t, ForwarderConfig{DialTimeout: 5 * time.Second})
	port := closedPort(t)
	start := time.Now()
	_, err := p.client.DialContext(testCtx(t, 10*time.Second), "tcp", dst(port).String())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial error = %v, want ECONNREFUSED", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %v, want well under DialTimeout", d)
	}
	if n := p.router.Stats().Denied[reasonDialRefused]; n != 1 {
		t.Errorf("Denied[dial_refused] = %d, want 1", n)
	}
}

// TestTCPForwardPolicy checks that denied flows get a fast RST counted by
// reason while an allowed flow in the same setup works.
func TestTCPForwardPolicy(t *testing.T) {
	port := server(t, echo)
	var dialed sync.Map
	dial := loopback(NetDialer(nil))
	p := newPair(t, ForwarderConfig{
		Policy: func(f Flow) error {
			switch f.Dst.Port() {
			case 25:
				return fmt.Errorf("smtp: %w", &Denied{Reason: "smtp"})
			case 26:
				return errors.New("not allowed")
			}
			return nil
		},
		Dial: func(ctx context.Context, f Flow) (net.Conn, error) {
			dialed.Store(f.Dst.Port(), true)
			return dial(ctx, f)
		},
	})
	ctx := testCtx(t, 30*time.Second)
	for _, port := range []uint16{25, 26, 26} {
		start := time.Now()
		_, err := p.client.DialTCP(ctx, netip.AddrPort{}, dst(port))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial :%d error = %v, want ECONNREFUSED", port, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("denial of :%d took %v", port, d)
		}
		if _, ok := dialed.Load(port); ok {
			t.Errorf("denied flow to :%d was dialled", port)
		}
	}
	if err := echoRoundTrip(ctx, p.client, dst(port), 1000); err != nil {
		t.Fatalf("allowed flow: %v", err)
	}
	st := p.router.Stats()
	if st.Denied["smtp"] != 1 || st.Denied[reasonPolicy] != 2 || st.TCPAccepted != 1 {
		t.Errorf("Denied = %v, TCPAccepted = %d; want smtp:1 policy:2, 1", st.Denied, st.TCPAccepted)
	}
}

// blackhole holds a dial until its context ends.
func blackhole(ctx context.Context, f Flow) (net.Conn, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestTCPForwardInFlightCaps fills the per-source and the global in-flight
// caps with dials that hang, checks that the SYN of an excess flow is
// dropped and counted as limit_inflight (not refused: the client's TCP
// retries it), that the slots return after DialTimeout, and that the
// retried flows then connect.
func TestTCPForwardInFlightCaps(t *testing.T) {
	const hangPort, dialTimeout = 9, 700 * time.Millisecond // below gVisor's 1s SYN RTO
	port := server(t, echo)
	dial := loopback(NetDialer(nil))
	p := newPair(t, ForwarderConfig{
		MaxInFlight:          3,
		MaxInFlightPerSource: 2,
		DialTimeout:          dialTimeout,
		Dial: func(ctx context.Context, f Flow) (net.Conn, error) {
			if f.Dst.Port() == hangPort {
				return blackhole(ctx, f)
			}
			return dial(ctx, f)
		},
	})
	srcA, srcB := netip.MustParseAddr("10.99.0.3"), netip.MustParseAddr("10.99.0.4")
	ctx := testCtx(t, 30*time.Second)
	hung := make(chan error, 3)
	hang := func(src netip.Addr, want int) {
		go func() {
			_, err := p.client.DialTCP(ctx, netip.AddrPortFrom(src, 0), dst(hangPort))
			hung <- err
		}()
		eventually(t, 5*time.Second, fmt.Sprintf("InFlight = %d", want), func() bool { return p.router.Stats().InFlight == want })
	}
	waited := make(chan error, 2)
	overCap := func(src netip.Addr, wantDenied uint64) {
		t.Helper()
		go func() {
			c, err := p.client.DialTCP(ctx, netip.AddrPortFrom(src, 0), dst(port))
			if err == nil {
				c.Close()
			}
			waited <- err
		}()
		eventually(t, 5*time.Second, fmt.Sprintf("Denied[limit_inflight] = %d", wantDenied), func() bool {
			return p.router.Stats().Denied[reasonLimitInFlight] >= wantDenied
		})
		select {
		case err := <-waited:
			t.Fatalf("over-cap dial from %v ended at once (%v); its SYN should have been dropped for a retry", src, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	hang(srcA, 1)
	hang(srcA, 2)
	overCap(srcA, 1) // per-source cap
	hang(srcB, 3)
	overCap(srcB, 2) // global cap
	for range 3 {
		if err := <-hung; !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("hung dial ended with %v, want ECONNREFUSED after DialTimeout", err)
		}
	}
	for range 2 {
		if err := <-waited; err != nil {
			t.Errorf("over-cap dial after the slots came back: %v, want it connected by its SYN retry", err)
		}
	}
	st := p.router.Stats()
	if st.InFlight != 0 || st.Denied[reasonDialTimeout] != 3 {
		t.Errorf("after timeouts: InFlight = %d, Denied = %v; want 0 and dial_timeout:3", st.InFlight, st.Denied)
	}
	if err := echoRoundTrip(ctx, p.client, dst(port), 100); err != nil {
		t.Fatalf("flow after slots returned: %v", err)
	}
}

// TestTCPForwardFlowCap checks the cap on established flows per source.
func TestTCPForwardFlowCap(t *testing.T) {
	port := server(t, echo)
	p := newPair(t, ForwarderConfig{MaxFlowsPerSource: 2})
	ctx := testCtx(t, 30*time.Second)
	var open []net.Conn
	for range 2 {
		c, err := p.client.DialTCP(ctx, netip.AddrPort{}, dst(port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	eventually(t, 5*time.Second, "2 active flows", func() bool { return p.router.Stats().TCPActive == 2 })
	if _, err := p.client.DialTCP(ctx, netip.AddrPort{}, dst(port)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("third flow: error = %v, want ECONNREFUSED", err)
	}
	if n := p.router.Stats().Denied[reasonLimitFlows]; n != 1 {
		t.Errorf("Denied[limit_flows] = %d, want 1", n)
	}
	open[0].Close()
	eventually(t, 5*time.Second, "a flow slot to return", func() bool { return p.router.Stats().TCPActive == 1 })
	if err := echoRoundTrip(ctx, p.client, dst(port), 100); err != nil {
		t.Fatalf("flow after a slot returned: %v", err)
	}
}

// TestTCPForwardOwnedAddress checks that owned addresses are not forwarded:
// a listener gets the flow, a port without one answers RST uncounted.
func TestTCPForwardOwnedAddress(t *testing.T) {
	var dials sync.Map
	p := newPair(t, ForwarderConfig{Dial: func(ctx context.Context, f Flow) (net.Conn, error) {
		dials.Store(f, true)
		return nil, errors.New("must not dial")
	}})
	ln, err := p.router.ListenTCP(netip.AddrPortFrom(routerAddr, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := testCtx(t, 10*time.Second)
	c, err := p.client.DialTCP(ctx, netip.AddrPort{}, netip.AddrPortFrom(routerAddr, 80))
	if err != nil {
		t.Fatalf("dial owned listener: %v", err)
	}
	c.Close()
	ac, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ac.Close()
	_, err = p.client.DialTCP(ctx, netip.AddrPort{}, netip.AddrPortFrom(routerAddr, 81))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial owned port without listener: %v, want ECONNREFUSED", err)
	}
	st := p.router.Stats()
	dials.Range(func(k, _ any) bool { t.Errorf("forwarder dialled %v", k); return true })
	if len(st.Denied) != 0 || st.TCPAccepted != 0 {
		t.Errorf("Stats = %+v, want no forwarding activity", st)
	}
}
