package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHeaderFloodsAreRefused: one huge header, or thousands of small
// ones, get 431 and a closed connection (MaxHeaderBytes of the sidecar's
// http.Server); a request with ordinary headers is served.
func TestHeaderFloodsAreRefused(t *testing.T) {
	r, read := startCountingSidecar(t, nil)
	var many strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&many, "X-Flood-%d: 1\r\n", i)
	}
	cases := []struct {
		name    string
		headers string
		want    int
	}{
		{"ordinary headers", "User-Agent: test\r\nAccept: */*\r\n", http.StatusOK},
		{"one 1 MiB header", "X-Huge: " + strings.Repeat("a", 1<<20) + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"20000 headers", many.String(), http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConn(t, r)
			br := bufio.NewReader(c)
			before := read.Load()
			go func() {
				_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
				_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: sidecar\r\n" + tc.headers + "\r\n"))
			}()
			resp, _ := readResponse(t, c, br, 10*time.Second)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %s, want %d", resp.Status, tc.want)
			}
			if tc.want != http.StatusOK {
				waitClosed(t, c, br, 10*time.Second)
				if n := read.Load() - before; n > 256<<10 {
					t.Fatalf("the server read %d KiB of headers", n>>10)
				}
			}
		})
	}
}

// TestSlowlorisIsDisconnected: a client that opens a connection and sends
// nothing, and one that sends its request headers a byte at a time
// forever, are both disconnected by the header timeout; meanwhile other
// requests are served, and afterwards the goroutines are back to where
// they were.
func TestSlowlorisIsDisconnected(t *testing.T) {
	r := startSidecar(t, nil)
	waitHTTP(t, r.base+"/healthz", http.StatusOK)
	http.DefaultClient.CloseIdleConnections()
	base := runtime.NumGoroutine()

	silent := rawConn(t, r)
	trickle := rawConn(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { dribble(ctx, trickle) })

	start := time.Now()
	// Positive control: the server still serves others.
	waitHTTP(t, r.base+"/healthz", http.StatusOK)
	http.DefaultClient.CloseIdleConnections()
	for name, c := range map[string]net.Conn{"silent": silent, "byte at a time": trickle} {
		waitClosed(t, c, c, 30*time.Second)
		t.Logf("%s client disconnected after %s", name, time.Since(start).Round(100*time.Millisecond))
	}
	cancel()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the slow clients", runtime.NumGoroutine(), base)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dribble writes a request that never ends, one byte every 100 ms, until
// ctx ends or the server closes c.
func dribble(ctx context.Context, c net.Conn) {
	req := []byte("GET /healthz HTTP/1.1\r\nHost: sidecar\r\nX-Slow: ")
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b := byte('a')
		if i < len(req) {
			b = req[i]
		}
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
	}
}
