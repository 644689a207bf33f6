package wsproxy

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
)

const (
	testCred = "test-credential-0123456789"
	testMTU  = 1400
)

// fastKeepalive makes dead-link detection quick in tests.
var fastKeepalive = Keepalive{Interval: 200 * time.Millisecond, Timeout: 500 * time.Millisecond, WriteTimeout: time.Second}

// fastBackoff makes reconnects quick in tests.
var fastBackoff = Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// newTestServer starts a Server behind an httptest server; both are shut
// down in cleanup.
func newTestServer(t testing.TB, cfg ServerConfig) (*Server, *httptest.Server) {
	t.Helper()
	s, err := NewServer(withTestDefaults(cfg))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() { stopTestServer(t, s, hs) })
	return s, hs
}

// withTestDefaults fills in the test credential (peer-a) and MTU.
func withTestDefaults(cfg ServerConfig) ServerConfig {
	if cfg.Auth == nil {
		cfg.Auth = NewBearerCredentials(map[string]string{testCred: "peer-a"})
	}
	if cfg.MTU == 0 {
		cfg.MTU = testMTU
	}
	return cfg
}

// stopTestServer shuts s down, then its HTTP server.
func stopTestServer(t testing.TB, s *Server, hs *httptest.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	hs.Close()
}

func wsURL(t testing.TB, hs *httptest.Server) *url.URL {
	t.Helper()
	u, err := ParseServerURL("ws" + hs.URL[len("http"):] + "/mesh")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// newTestClient returns a Client for hs, closed in cleanup.
func newTestClient(t testing.TB, hs *httptest.Server, mod func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{
		URL: wsURL(t, hs), Credential: testCred, MTU: testMTU,
		Keepalive: fastKeepalive, Backoff: fastBackoff,
		Proxy: func(*url.URL) (*url.URL, error) { return nil, nil },
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// opened opens b and returns its single receive function.
func opened(t testing.TB, b conn.Bind) conn.ReceiveFunc {
	t.Helper()
	fns, _, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 1 {
		t.Fatalf("Open returned %d receive functions", len(fns))
	}
	return fns[0]
}

// recvOne receives one datagram with its endpoint, or fails after d.
func recvOne(t testing.TB, recv conn.ReceiveFunc, d time.Duration) ([]byte, conn.Endpoint) {
	t.Helper()
	type res struct {
		b   []byte
		ep  conn.Endpoint
		err error
	}
	ch := make(chan res, 1)
	go func() {
		bufs := [][]byte{make([]byte, 65535)}
		sizes := []int{0}
		eps := []conn.Endpoint{nil}
		n, err := recv(bufs, sizes, eps)
		if n == 0 && err == nil {
			err = context.DeadlineExceeded
		}
		ch <- res{bufs[0][:sizes[0]], eps[0], err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("receive: %v", r.err)
		}
		return r.b, r.ep
	case <-time.After(d):
		t.Fatalf("no datagram within %s", d)
		return nil, nil
	}
}

func waitConnected(t testing.TB, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
