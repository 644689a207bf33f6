package relay

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSpliceHalfClose(t *testing.T) {
	a1, a2 := tcpPair(t)
	b1, b2 := tcpPair(t)
	done := make(chan struct{})
	go func() { Splice(context.Background(), a2, b1); close(done) }()
	if _, err := a1.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	_ = a1.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(b2) // EOF arrives: the half-close passed through
	if err != nil || string(got) != "request" {
		t.Fatalf("far side got %q %v", got, err)
	}
	if _, err := b2.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	b2.Close()
	got, err = io.ReadAll(a1)
	if err != nil || string(got) != "reply" {
		t.Fatalf("reply after half-close: %q %v", got, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Splice did not return")
	}
}

func TestServeUDPSessionsAndIdle(t *testing.T) {
	echo, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteTo(buf[:n], from)
		}
	}()
	front, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var open, dials atomic.Int32
	done := make(chan struct{})
	go func() {
		ServeUDP(front, UDPConfig{
			Dial: func(netip.AddrPort) (net.Conn, error) {
				dials.Add(1)
				return net.Dial("udp", echo.LocalAddr().String())
			},
			Idle: 100 * time.Millisecond,
			Admit: func() bool {
				if open.Add(1) > 1 {
					open.Add(-1)
					return false
				}
				return true
			},
			Release: func() { open.Add(-1) },
		})
		close(done)
	}()
	c1 := roundTrip(t, front.LocalAddr().String(), "one", true)
	c2, _ := net.Dial("udp", front.LocalAddr().String())
	defer c2.Close()
	// The cap admits one session: the second client gets nothing.
	_, _ = c2.Write([]byte("two"))
	_ = c2.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c2.Read(make([]byte, 10)); err == nil {
		t.Fatal("a session over the cap was served")
	}
	time.Sleep(300 * time.Millisecond) // the first session idles out
	if open.Load() > 0 {
		t.Fatalf("idle session not reaped: %d open", open.Load())
	}
	c1.Close()
	roundTrip(t, front.LocalAddr().String(), "three", true).Close()
	front.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeUDP did not return")
	}
	if dials.Load() < 2 {
		t.Fatalf("dials %d", dials.Load())
	}
}

func roundTrip(t *testing.T, addr, msg string, want bool) net.Conn {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte(msg))
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if want && (err != nil || string(buf[:n]) != msg) {
		t.Fatalf("udp round trip %q: %q %v", msg, buf[:n], err)
	}
	return c
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c1.Close(); c2.Close() })
	return c1, c2
}
