package faultrelay

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestOutage: during an outage the current connection carries nothing
// and passes no FIN on even when the server closes; a connection made
// during it is accepted and then silent (BlackholeNew) or reset at once
// (RefuseNew); after it a new connection relays again while the old one
// stays dead.
func TestOutage(t *testing.T) {
	for _, mode := range []OutageMode{BlackholeNew, RefuseNew} {
		t.Run(map[OutageMode]string{BlackholeNew: "BlackholeNew", RefuseNew: "RefuseNew"}[mode], func(t *testing.T) {
			testOutage(t, mode)
		})
	}
}

func testOutage(t *testing.T, mode OutageMode) {
	addr, conns := heldServer(t)
	r := startRelay(t, addr)
	old := dial(t, r)
	oldServer := accepted(t, conns)
	if err := echoOnce(old, oldServer, time.Second); err != nil {
		t.Fatalf("positive control before the outage: %v", err)
	}

	end := r.Outage(2*time.Second, mode)
	if err := echoOnce(old, oldServer, 300*time.Millisecond); err == nil {
		t.Fatal("the current connection still relays during the outage")
	}
	oldServer.Close() // a FIN the relay must swallow
	_ = old.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := old.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read on the blackholed connection: %v, want a timeout (no FIN, no data)", err)
	}

	err := probeDuring(t, r)
	switch {
	case mode == BlackholeNew && !isTimeout(err):
		t.Fatalf("a connection made during the outage: read %v, want a timeout", err)
	case mode == RefuseNew && (err == nil || isTimeout(err)):
		t.Fatalf("a connection made during the outage: read %v, want it reset", err)
	}

	time.Sleep(time.Until(end))
	after := dial(t, r)
	if err := echoOnce(after, accepted(t, conns), time.Second); err != nil {
		t.Fatalf("a connection made after the outage does not relay: %v", err)
	}
	_ = old.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := old.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("the connection blackholed by the outage woke up after it: %v", err)
	}
}

// probeDuring connects to the relay, sends a byte and waits 300 ms for
// an answer; the error is the dial's or the read's (a reset may already
// fail the dial).
func probeDuring(t *testing.T, r *Relay) error {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, _ = c.Write([]byte("x"))
	_, err = c.Read(make([]byte, 1))
	return err
}

// echoOnce sends a message from c to s through the relay and back.
func echoOnce(c, s interface {
	io.ReadWriter
	SetDeadline(time.Time) error
}, timeout time.Duration) error {
	msg := []byte("ping")
	for _, x := range []interface {
		io.ReadWriter
		SetDeadline(time.Time) error
	}{c, s} {
		_ = x.SetDeadline(time.Now().Add(timeout))
	}
	defer c.SetDeadline(time.Time{})
	defer s.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(s, buf); err != nil {
		return err
	}
	if _, err := s.Write(buf); err != nil {
		return err
	}
	_, err := io.ReadFull(c, buf)
	return err
}
