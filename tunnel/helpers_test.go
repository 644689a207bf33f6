package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/meshlaunch/meshlaunch/policy"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

const (
	testCred   = "test-credential-0123456789"
	testPrefix = "/mesh"
)

// testPolicy allows loopback except 127.0.0.2, so refusals and positive
// controls both run on loopback.
var testPolicy = policy.New(policy.Config{
	Allow: mustRules("127.0.0.0/8"),
	Deny:  mustRules("127.0.0.2/32"),
})

func mustRules(specs ...string) []policy.Rule {
	r, err := policy.ParseRules(specs)
	if err != nil {
		panic(err)
	}
	return r
}

// policyDial applies testPolicy to the resolved address, as the sidecar's
// dialer does at dial time.
func policyDial(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, err
	}
	if err := testPolicy.Check(network, ap); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// fakeResolver answers from a map and falls back to the system resolver.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// logBuffer is a concurrency-safe log sink for assertions on log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testServer struct {
	srv *Server
	ts  *httptest.Server
	url *url.URL
	log *logBuffer
}

// newTestServer serves a tunnel Server under testPrefix on loopback.
func newTestServer(t testing.TB, mutate func(*ServerConfig)) *testServer {
	t.Helper()
	lb := &logBuffer{}
	cfg := ServerConfig{
		Auth:      wsproxy.NewBearerCredentials(map[string]string{testCred: "job"}),
		Dial:      policyDial,
		Resolver:  fakeResolver{"denied.test": {netip.MustParseAddr("127.0.0.2")}},
		Keepalive: wsproxy.Keepalive{Interval: time.Second, Timeout: time.Second},
		UDPIdle:   5 * time.Second,
		Logger:    lb.logger(),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(testPrefix+PathPrefix, srv)
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.Close()
	})
	u, err := wsproxy.ParseServerURL(strings.Replace(ts.URL, "http", "ws", 1) + testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{srv: srv, ts: ts, url: u, log: lb}
}

// newTestClient returns a client of u with the given credential.
func newTestClient(t testing.TB, u *url.URL, cred string) (*Client, *logBuffer) {
	t.Helper()
	lb := &logBuffer{}
	c, err := NewClient(ClientConfig{
		URL:        u,
		Credential: cred,
		HTTP:       wsproxy.HTTPOptions{Proxy: func(*url.URL) (*url.URL, error) { return nil, nil }},
		Keepalive:  wsproxy.Keepalive{Interval: time.Second, Timeout: time.Second},
		Backoff:    wsproxy.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		UDPIdle:    5 * time.Second,
		Logger:     lb.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, lb
}

// runClient runs c until the test ends; Run's error is checked then.
func runClient(t testing.TB, c *Client, locals, remotes []Forward, socks []netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, locals, remotes, socks) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
}

// freePort finds a port free for network on 127.0.0.1.
func freePort(t testing.TB, network string) uint16 {
	t.Helper()
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return uint16(pc.LocalAddr().(*net.UDPAddr).Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func loopback(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

// serveTCP runs handle for every connection to a listener on addr.
func serveTCP(t testing.TB, addr string, handle func(*net.TCPConn)) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c.(*net.TCPConn))
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// echoTCP echoes and half-closes when the client does.
func echoTCP(t testing.TB) uint16 {
	return serveTCP(t, "127.0.0.1:0", func(c *net.TCPConn) {
		_, _ = io.Copy(c, c)
		_ = c.CloseWrite()
	})
}

// echoUDP echoes datagrams on 127.0.0.1.
func echoUDP(t testing.TB) uint16 {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	})
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	return uint16(pc.LocalAddr().(*net.UDPAddr).Port)
}

// dialRetry dials addr until it answers: Run listens asynchronously.
func dialRetry(t testing.TB, network, addr string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial(network, addr)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// roundTrip writes msg and reads the same number of bytes back.
func roundTrip(c net.Conn, msg []byte) ([]byte, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	got := make([]byte, len(msg))
	_, err := io.ReadFull(c, got)
	return got, err
}

// udpRoundTrip sends msg until an answer arrives (the first datagrams may
// be dropped while the session's websocket opens).
func udpRoundTrip(t testing.TB, c net.Conn, msg []byte) []byte {
	t.Helper()
	buf := make([]byte, 65535)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if _, err := c.Write(msg); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := c.Read(buf)
		if err == nil {
			return buf[:n]
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the listener may not be up yet
	}
	t.Fatalf("no UDP answer to %q", msg)
	return nil
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fwd(t testing.TB, parse func(string) (Forward, error), format string, args ...any) Forward {
	t.Helper()
	f, err := parse(fmt.Sprintf(format, args...))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func websocketCloseStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }
