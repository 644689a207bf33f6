package sidecar

import (
	"context"
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/meshtest"
)

// TestSpoofedSourceIsDroppedAndCounted: packets the job sends with a
// source address other than its own, over TCP and UDP, reach nothing
// (WireGuard's AllowedIPs on the sidecar drop them) and are counted as
// meshlaunch_flows_denied_total{reason="spoofed_source"}; the same
// flows from the job's own address work.
func TestSpoofedSourceIsDroppedAndCounted(t *testing.T) {
	tcpPort, udpPort := meshtest.EchoTCP(t), meshtest.EchoUDP(t)
	r := startSidecar(t, func(c *Config) { c.dial = meshtest.LoopbackDialer() })
	job := startJob(t, r)
	own := meshtest.JobAddr
	for _, spoofed := range []netip.Addr{netip.MustParseAddr("10.244.1.99"), meshtest.ServiceAddr} {
		before := spoofedCount(t, r)
		accepted := r.sc.stack.Stats().TCPAccepted + r.sc.stack.Stats().UDPAccepted
		if err := echoTCPFrom(job, own, tcpPort, 10*time.Second); err != nil {
			t.Fatalf("TCP from the job's own address: %v", err)
		}
		if err := echoTCPFrom(job, spoofed, tcpPort, 2*time.Second); err == nil {
			t.Fatalf("TCP from spoofed %v got through", spoofed)
		}
		if err := echoUDPFrom(job, own, udpPort, 10*time.Second); err != nil {
			t.Fatalf("UDP from the job's own address: %v", err)
		}
		if err := echoUDPFrom(job, spoofed, udpPort, time.Second); err == nil {
			t.Fatalf("UDP from spoofed %v got through", spoofed)
		}
		if st := r.sc.stack.Stats(); st.TCPAccepted+st.UDPAccepted != accepted+2 {
			t.Fatalf("the forwarder accepted %d flows, want only the 2 from the job's own address", st.TCPAccepted+st.UDPAccepted-accepted)
		}
		// At least the SYN and the datagram; retransmissions add more.
		if n := spoofedCount(t, r); n < before+2 {
			t.Fatalf("spoofed packets from %v counted %d times, want at least 2", spoofed, n-before)
		}
	}
}

// echoTCPFrom sends a few bytes over TCP from src through the mesh to the
// echo server on port and checks the echo.
func echoTCPFrom(job *meshtest.Job, src netip.Addr, port uint16, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := job.Stack.DialTCP(ctx, netip.AddrPortFrom(src, 0), meshtest.TestAddr(port))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, 4))
	return err
}

// echoUDPFrom is echoTCPFrom for one UDP datagram.
func echoUDPFrom(job *meshtest.Job, src netip.Addr, port uint16, d time.Duration) error {
	c, err := job.Stack.DialUDP(netip.AddrPortFrom(src, 0), meshtest.TestAddr(port))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 16))
	return err
}

var spoofedMetric = regexp.MustCompile(`(?m)^meshlaunch_flows_denied_total\{reason="spoofed_source"\} (\d+)$`)

// spoofedCount reads the spoofed-source counter from /metrics (0 if absent).
func spoofedCount(t *testing.T, r *running) uint64 {
	t.Helper()
	m := spoofedMetric.FindStringSubmatch(get(t, r.base+"/metrics", ""))
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}
