package wsproxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connectProxy is a minimal HTTP CONNECT proxy that requires Basic
// credentials user:pass, counting the tunnels it opened.
type connectProxy struct {
	ln      net.Listener
	tunnels atomic.Int32
	wg      sync.WaitGroup
}

func newConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:pass"))
	if req.Method != http.MethodConnect || req.Header.Get("Proxy-Authorization") != want {
		_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
		return
	}
	s, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer s.Close()
	p.tunnels.Add(1)
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() { _, _ = io.Copy(s, br); s.Close(); close(done) }()
	_, _ = io.Copy(c, s)
	c.Close()
	<-done
}

func fixedProxy(raw string) ProxyFunc {
	u, _ := url.Parse(raw)
	return func(*url.URL) (*url.URL, error) { return u, nil }
}

func TestClientThroughConnectProxy(t *testing.T) {
	_, hs := newTestServer(t, ServerConfig{})
	p := newConnectProxy(t)
	addr := p.ln.Addr().String()

	cli := newTestClient(t, hs, func(c *ClientConfig) { c.Proxy = fixedProxy("http://user:pass@" + addr) })
	opened(t, cli)
	waitConnected(t, cli)
	if p.tunnels.Load() == 0 {
		t.Fatal("client connected without the proxy")
	}

	bad := newTestClient(t, hs, func(c *ClientConfig) { c.Proxy = fixedProxy("http://user:wrong@" + addr) })
	opened(t, bad)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := bad.WaitConnected(ctx)
	if err == nil || !strings.Contains(err.Error(), "407") {
		t.Fatalf("wrong proxy password: %v, want an error naming 407", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error leaks the proxy password: %v", err)
	}
}

func TestProxyFromEnvironmentHonoursNoProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://user:pass@proxy.example:3128")
	t.Setenv("NO_PROXY", "direct.example")
	pf := ProxyFromEnvironment()
	for _, tc := range []struct{ target, want string }{
		{"https://sidecar.example/mesh", "http://user:pass@proxy.example:3128"},
		{"https://direct.example/mesh", ""},
	} {
		u, _ := url.Parse(tc.target)
		got, err := pf(u)
		if err != nil {
			t.Fatal(err)
		}
		if (got == nil && tc.want != "") || (got != nil && got.String() != tc.want) {
			t.Errorf("proxy for %s = %v, want %q", tc.target, got, tc.want)
		}
	}
}

func TestTLSVerification(t *testing.T) {
	srv, err := NewServer(ServerConfig{Auth: NewBearerCredentials(map[string]string{testCred: "p"}), MTU: testMTU})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewTLSServer(srv)
	defer func() { _ = srv.Shutdown(context.Background()); hs.Close() }()
	u, _ := ParseServerURL("wss" + strings.TrimPrefix(hs.URL, "https") + "/mesh")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		tls   TLSOptions
		works bool
	}{
		{"self-signed refused", TLSOptions{}, false},
		{"CA file trusted", TLSOptions{CAFile: caFile}, true},
		{"insecure accepted", TLSOptions{Insecure: true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := NewClient(ClientConfig{
				URL: u, Credential: testCred, MTU: testMTU, TLS: tc.tls, Backoff: fastBackoff,
				Proxy: func(*url.URL) (*url.URL, error) { return nil, nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			opened(t, cli)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err = cli.WaitConnected(ctx)
			if tc.works != (err == nil) {
				t.Fatalf("WaitConnected = %v, want works=%v", err, tc.works)
			}
			if !tc.works && !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("refusal does not say why: %v", err)
			}
		})
	}
	if _, err := NewClient(ClientConfig{URL: u, Credential: testCred, MTU: testMTU, TLS: TLSOptions{CAFile: "/nonexistent/ca.pem"}}); err == nil {
		t.Fatal("missing CA file accepted")
	}
}

func TestUnauthorizedIsReported(t *testing.T) {
	_, hs := newTestServer(t, ServerConfig{})
	cli := newTestClient(t, hs, func(c *ClientConfig) { c.Credential = "not-the-credential-000" })
	opened(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := cli.WaitConnected(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("WaitConnected = %v, want ErrUnauthorized", err)
	}
}

func TestParseServerURL(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{"wss://mesh.example.org", "wss://mesh.example.org", ""},
		{"ws://10.0.0.1:8080/prefix/", "ws://10.0.0.1:8080/prefix", ""},
		{"https://mesh.example.org", "", "scheme must be ws:// or wss://"},
		{"wss://", "", "no host"},
		{"wss://user:pw@h", "", "credentials in the URL"},
		{"wss://h/?token=x", "", "query"},
		{"mesh.example.org", "", "scheme"},
	}
	for _, tc := range cases {
		u, err := ParseServerURL(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseServerURL(%q) error = %v, want one containing %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseServerURL(%q) = %v", tc.in, err)
		case tc.err == "" && u.String() != tc.want:
			t.Errorf("ParseServerURL(%q) = %s, want %s", tc.in, u, tc.want)
		}
	}
	if err := func() error { _, err := ParseServerURL("wss://user:secretpw@h"); return err }(); strings.Contains(err.Error(), "secretpw") {
		t.Errorf("error leaks the password: %v", err)
	}
	base, _ := ParseServerURL("wss://h/prefix")
	if got := JoinPath(base, "/v1/mesh").String(); got != "wss://h/prefix/v1/mesh" {
		t.Errorf("JoinPath = %s", got)
	}
}

func TestBackoffBounds(t *testing.T) {
	s := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}.Retry()
	prevMax := time.Duration(0)
	for i := range 10 {
		d := s.Next()
		ceil := min(100*time.Millisecond<<i, time.Second)
		if d < ceil/2 || d > ceil {
			t.Fatalf("attempt %d: delay %s outside [%s, %s]", i, d, ceil/2, ceil)
		}
		prevMax = ceil
	}
	if prevMax != time.Second {
		t.Fatalf("backoff never reached its cap")
	}
	s.Connected(time.Hour)
	if d := s.Next(); d > 100*time.Millisecond {
		t.Fatalf("after reset delay %s, want <= initial", d)
	}
}
