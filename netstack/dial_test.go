package netstack

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDialTCPSpoofedSource checks that a listener sees the spoofed source
// the dialling stack used, and that data flows both ways.
func TestDialTCPSpoofedSource(t *testing.T) {
	a, b := newStack(t, clientAddr), newStack(t, routerAddr)
	connect(t, a, b)
	ln, err := a.ListenTCP(netip.AddrPortFrom(clientAddr, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	spoofed := netip.MustParseAddrPort("198.18.7.7:40001")
	c, err := b.DialTCP(testCtx(t, 10*time.Second), spoofed, netip.AddrPortFrom(clientAddr, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ac, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if got := ac.RemoteAddr().(*net.TCPAddr).AddrPort(); got != spoofed {
		t.Fatalf("listener sees RemoteAddr %v, want the spoofed %v", got, spoofed)
	}
	io.WriteString(c, "hello")
	ac.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(ac, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	io.WriteString(ac, "world")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "world" {
		t.Fatalf("read back %q, %v", buf, err)
	}
}

// TestDialUDPSpoofedSource is TestDialTCPSpoofedSource for UDP.
func TestDialUDPSpoofedSource(t *testing.T) {
	a, b := newStack(t, clientAddr), newStack(t, routerAddr)
	connect(t, a, b)
	pc, err := a.ListenUDP(netip.AddrPortFrom(clientAddr, 5353))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	spoofed := netip.MustParseAddrPort("198.18.7.8:40002")
	c, err := b.DialUDP(spoofed, netip.AddrPortFrom(clientAddr, 5353))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	pc.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, from, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := from.(*net.UDPAddr).AddrPort(); got != spoofed || string(buf[:n]) != "query" {
		t.Fatalf("got %q from %v, want %q from %v", buf[:n], got, "query", spoofed)
	}
	if _, err := pc.WriteTo([]byte("answer"), from); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("reply %q, %v", buf[:n], err)
	}
}

// TestDialContextErrors checks argument errors and the conversion of gVisor
// errors at the boundary.
func TestDialContextErrors(t *testing.T) {
	a, b := newStack(t, clientAddr), newStack(t, routerAddr)
	connect(t, a, b)
	ctx := testCtx(t, 5*time.Second)
	for _, tc := range []struct{ network, address, want string }{
		{"tcp", "example.com:80", "resolves no names"},
		{"sctp", "10.99.0.1:80", "unsupported network"},
		{"tcp6", "10.99.0.1:80", "not an IPv6 address"},
		{"udp4", "[fd00::1]:53", "not an IPv4 address"},
		{"tcp", "10.99.0.1", "not an ip:port"},
	} {
		_, err := a.DialContext(ctx, tc.network, tc.address)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "netstack: dial ") {
			t.Errorf("DialContext(%q, %q) = %v, want an error containing %q", tc.network, tc.address, err, tc.want)
		}
	}
	// No listener on the router: the RST becomes ECONNREFUSED.
	if _, err := a.DialContext(ctx, "tcp4", "10.99.0.1:1"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial to a closed port: %v, want ECONNREFUSED", err)
	}
	// The router does not forward: the SYN is dropped and ctx ends the dial.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := a.DialContext(short, "tcp", "198.18.0.99:80"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dial to a dropping destination: %v, want context.DeadlineExceeded", err)
	}
	// Listening twice on one port.
	ln, err := a.ListenTCP(netip.AddrPortFrom(clientAddr, 99))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := a.ListenTCP(netip.AddrPortFrom(clientAddr, 99)); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second listen: %v, want EADDRINUSE", err)
	}
}
