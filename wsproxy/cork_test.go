package wsproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/meshlaunch/meshlaunch/internal/conntest"
)

// corkPair is a websocket between a client dialled with Dial and a
// server accepted with Accept, with the writes of each side counted.
type corkPair struct {
	client, server         *websocket.Conn
	clientCork, serverCork Corker
	clientCounts           conntest.Counts
	serverCounts           conntest.Counts
}

func newCorkPair(t *testing.T) *corkPair {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &corkPair{}
	accepted := make(chan struct{})
	done := make(chan struct{})
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, cork, err := Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		p.server, p.serverCork = ws, cork
		close(accepted)
		<-done // the handler owns the hijacked connection until the test ends
	}))
	hs.Listener = conntest.Listener{Listener: ln, C: &p.serverCounts}
	hs.Start()
	t.Cleanup(func() { close(done); hs.Close() })

	u, _ := url.Parse(hs.URL)
	hc, err := NewHTTPClient(u, HTTPOptions{
		Proxy: func(*url.URL) (*url.URL, error) { return nil, nil },
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return conntest.Conn{Conn: c, C: &p.clientCounts}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.client, p.clientCork, _, err = Dial(ctx, "ws"+hs.URL[len("http"):], &websocket.DialOptions{
		HTTPClient: hc, CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		t.Fatal(err)
	}
	<-accepted
	p.client.SetReadLimit(1 << 20)
	p.server.SetReadLimit(1 << 20)
	t.Cleanup(func() { p.client.CloseNow(); p.server.CloseNow() })
	return p
}

// sendAndCount writes msg from one side, reads it on the other, checks
// it, and returns how many writes the sender's connection made.
func sendAndCount(t *testing.T, from, to *websocket.Conn, writes *atomic.Int64, write func([]byte) error, msg []byte) int64 {
	t.Helper()
	before := writes.Load()
	got := make(chan []byte, 1)
	go func() {
		_, b, err := to.Read(context.Background())
		if err != nil {
			t.Errorf("read: %v", err)
		}
		got <- b
	}()
	if err := write(msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	if b := <-got; !bytes.Equal(b, msg) {
		t.Fatalf("message of %d bytes arrived as %d bytes, or changed", len(msg), len(b))
	}
	return writes.Load() - before
}

// A 64 KiB message is one write on the socket when corked, on both sides;
// the positive control shows the library's own write path makes many.
func TestCorkedMessageIsOneWrite(t *testing.T) {
	p := newCorkPair(t)
	msg := make([]byte, 64<<10)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	ctx := context.Background()
	bin := websocket.MessageBinary

	plain := sendAndCount(t, p.client, p.server, &p.clientCounts.Writes, func(b []byte) error { return p.client.Write(ctx, bin, b) }, msg)
	if plain < 8 {
		t.Fatalf("control: an uncorked 64 KiB client message took %d writes; the library was expected to write it in 4 KiB pieces", plain)
	}
	corked := sendAndCount(t, p.client, p.server, &p.clientCounts.Writes, func(b []byte) error { return WriteCorked(ctx, p.client, p.clientCork, bin, b) }, msg)
	if corked != 1 {
		t.Errorf("a corked 64 KiB client message took %d writes, want 1 (uncorked: %d)", corked, plain)
	}

	for _, n := range []int{1, uncorkedMax} { // the library writes these at once: no cork needed
		small := msg[:n]
		if w := sendAndCount(t, p.client, p.server, &p.clientCounts.Writes, func(b []byte) error { return WriteCorked(ctx, p.client, p.clientCork, bin, b) }, small); w != 1 {
			t.Errorf("a %d-byte client message took %d writes, want 1", n, w)
		}
	}

	plain = sendAndCount(t, p.server, p.client, &p.serverCounts.Writes, func(b []byte) error { return p.server.Write(ctx, bin, b) }, msg)
	corked = sendAndCount(t, p.server, p.client, &p.serverCounts.Writes, func(b []byte) error { return WriteCorked(ctx, p.server, p.serverCork, bin, b) }, msg)
	if plain < 2 || corked != 1 {
		t.Errorf("server message of 64 KiB: %d writes corked (want 1), %d uncorked (want ≥ 2)", corked, plain)
	}
}

// A control frame written while another writer holds the cork leaves with
// the next Uncork; nothing stays behind.
func TestCorkedPingLeavesAtUncork(t *testing.T) {
	p := newCorkPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _, _, _ = p.server.Read(ctx) }) // answers pings until the test ends
	defer p.server.CloseNow()
	wg.Go(func() { _, _, _ = p.client.Read(ctx) }) // reads the pongs
	defer p.client.CloseNow()

	p.clientCork.Cork()
	pinged := make(chan error, 1)
	go func() { pinged <- p.client.Ping(ctx) }()
	select {
	case err := <-pinged:
		t.Fatalf("the ping was answered while its frame should still be held by the cork (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := p.clientCork.Uncork(); err != nil {
		t.Fatalf("uncork: %v", err)
	}
	if err := <-pinged; err != nil {
		t.Fatalf("ping after uncork: %v", err)
	}
}

// A corked write whose flush fails reports the failure at Uncork, and
// every later write fails too: nothing is silently lost.
func TestCorkFlushErrorSticks(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	c := newCorkConn(a)
	c.Cork()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatalf("corked write: %v", err)
	}
	err := c.Uncork()
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("uncork over a closed pipe: %v, want io.ErrClosedPipe", err)
	}
	if _, err := c.Write([]byte("later")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write after a failed flush: %v, want io.ErrClosedPipe", err)
	}
}

// More than maxCorked bytes while corked are written in order, never
// held beyond the bound.
func TestCorkBoundsWhatItHolds(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := newCorkConn(a)
	want := make([]byte, 3*maxCorked+123)
	for i := range want {
		want[i] = byte(i % 251)
	}
	got := make(chan []byte, 1)
	go func() { d, _ := io.ReadAll(b); got <- d }()
	c.Cork()
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 4096)
		if _, err := c.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := c.Uncork(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if d := <-got; !bytes.Equal(d, want) {
		t.Fatalf("read %d bytes back, want %d in order", len(d), len(want))
	}
}
