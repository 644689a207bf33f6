package netstack

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
)

// udpEcho answers every datagram with itself.
func udpEcho(b []byte) []byte { return b }

// udpRoundTrip sends msg on c and expects it back within d.
func udpRoundTrip(c net.Conn, msg string, d time.Duration) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !bytes.Equal(buf[:n], []byte(msg)) {
		return fmt.Errorf("got %q, want %q", buf[:n], msg)
	}
	return nil
}

// TestUDPForwardEcho relays datagrams both ways, one session per 4-tuple.
func TestUDPForwardEcho(t *testing.T) {
	port := udpServer(t, udpEcho)
	p := newPair(t, ForwarderConfig{})
	c, err := p.client.DialUDP(netip.AddrPort{}, dst(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 10 {
		if err := udpRoundTrip(c, fmt.Sprintf("datagram %d", i), 5*time.Second); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
	}
	c2, err := p.client.DialUDP(netip.AddrPort{}, dst(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := udpRoundTrip(c2, "second 4-tuple", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	st := p.router.Stats()
	if st.UDPAccepted != 2 || st.UDPActive != 2 {
		t.Errorf("UDPAccepted, UDPActive = %d, %d, want 2, 2", st.UDPAccepted, st.UDPActive)
	}
	want := uint64(10*len("datagram 0") + len("second 4-tuple"))
	eventually(t, 5*time.Second, fmt.Sprintf("BytesIn and BytesOut to reach %d", want), func() bool {
		st := p.router.Stats()
		return st.BytesIn == want && st.BytesOut == want
	})
}

// TestUDPForwardIdleReap checks that traffic in either direction keeps a
// session alive and that it is reaped after UDPIdleTimeout without any.
func TestUDPForwardIdleReap(t *testing.T) {
	const idle = 300 * time.Millisecond
	sink := udpServer(t, func([]byte) []byte { return nil })
	p := newPair(t, ForwarderConfig{UDPIdleTimeout: idle})
	c, err := p.client.DialUDP(netip.AddrPort{}, dst(sink))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One-way traffic for 3x the idle timeout: the session must live on.
	var quiet time.Time
	for i := range 10 {
		if i > 0 {
			time.Sleep(idle / 3)
		}
		if _, err := c.Write([]byte("keepalive")); err != nil {
			t.Fatal(err)
		}
		quiet = time.Now()
	}
	if st := p.router.Stats(); st.UDPAccepted != 1 || st.UDPActive != 1 {
		t.Fatalf("during traffic: UDPAccepted, UDPActive = %d, %d, want 1, 1", st.UDPAccepted, st.UDPActive)
	}
	eventually(t, 10*idle, "the idle session to be reaped", func() bool { return p.router.Stats().UDPActive == 0 })
	if d := time.Since(quiet); d < idle*8/10 {
		t.Errorf("session reaped after %v, before the idle timeout %v", d, idle)
	}
	if _, err := c.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a new session", func() bool { return p.router.Stats().UDPAccepted == 2 })
}

// TestUDPForwardCap checks that a session over the per-source cap is dropped
// and counted while the admitted one keeps working.
func TestUDPForwardCap(t *testing.T) {
	port := udpServer(t, udpEcho)
	p := newPair(t, ForwarderConfig{MaxFlowsPerSource: 1})
	c1, err := p.client.DialUDP(netip.AddrPort{}, dst(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if err := udpRoundTrip(c1, "first", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c2, err := p.client.DialUDP(netip.AddrPort{}, dst(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	var ne net.Error
	if err := udpRoundTrip(c2, "over cap", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("over-cap session: %v, want a read timeout", err)
	}
	if err := udpRoundTrip(c1, "first again", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	st := p.router.Stats()
	if st.Denied[reasonLimitFlows] != 1 || st.UDPAccepted != 1 {
		t.Errorf("Denied = %v, UDPAccepted = %d; want limit_flows:1, 1", st.Denied, st.UDPAccepted)
	}
}
