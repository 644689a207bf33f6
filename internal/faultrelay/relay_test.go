package faultrelay

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func TestRelayResetAndBlackhole(t *testing.T) {
	r, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("hi")); err != nil {
			return err
		}
		b := make([]byte, 2)
		_, err := io.ReadFull(c, b)
		return err
	}
	if err := roundTrip(c); err != nil {
		t.Fatalf("relay does not relay: %v", err)
	}
	r.Blackhole()
	if err := roundTrip(c); err == nil {
		t.Fatal("blackholed connection still relays")
	}
	c2, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := roundTrip(c2); err != nil {
		t.Fatalf("a new connection after a blackhole does not relay: %v", err)
	}
	r.Reset()
	_ = c2.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("reset connection still readable")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.WaitAccepted(ctx, 2); err != nil {
		t.Fatal(err)
	}
}
