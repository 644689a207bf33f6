package tunnel

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sendAndEcho writes data, half-closes, and returns everything read until
// EOF: the echo server's half-close must come back through the tunnel.
func sendAndEcho(c *net.TCPConn, data []byte) ([]byte, error) {
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, rerr := io.ReadAll(c)
	if err := <-werr; err != nil {
		return got, err
	}
	return got, rerr
}

func TestLocalTCP(t *testing.T) {
	ts := newTestServer(t, nil)
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoTCP(t)
	byIP, byName := freePort(t, "tcp"), freePort(t, "tcp")
	runClient(t, c, []Forward{
		fwd(t, ParseLocal, "%d:127.0.0.1:%d", byIP, echo),
		fwd(t, ParseLocal, "127.0.0.1:%d:localhost:%d", byName, echo),
	}, nil, nil)

	t.Run("10MiB both ways with half-close", func(t *testing.T) {
		data := make([]byte, 10<<20)
		_, _ = rand.Read(data)
		conn := dialRetry(t, "tcp", loopback(byIP).String()).(*net.TCPConn)
		defer conn.Close()
		got, err := sendAndEcho(conn, data)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("echo differs: got %d bytes, want %d", len(got), len(data))
		}
	})
	t.Run("50 concurrent connections", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for i := range 50 {
			wg.Go(func() {
				conn, err := net.Dial("tcp", loopback(byIP).String())
				if err != nil {
					errs <- err
					return
				}
				defer conn.Close()
				msg := bytes.Repeat([]byte{byte(i)}, 64<<10)
				got, err := sendAndEcho(conn.(*net.TCPConn), msg)
				if err == nil && !bytes.Equal(got, msg) {
					err = errors.New("connection " + strconv.Itoa(i) + ": echo differs")
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("host name resolved by the server", func(t *testing.T) {
		conn := dialRetry(t, "tcp", loopback(byName).String())
		defer conn.Close()
		got, err := roundTrip(conn, []byte("hello by name"))
		if err != nil || string(got) != "hello by name" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	if s := ts.srv.Stats(); s.Streams < 52 || s.BytesUp < 10<<20 {
		t.Errorf("stats %+v: want at least 52 streams and 10 MiB up", s)
	}
}

func TestLocalUDP(t *testing.T) {
	ts := newTestServer(t, nil)
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoUDP(t)
	port := freePort(t, "udp")
	runClient(t, c, []Forward{fwd(t, ParseLocal, "%d:127.0.0.1:%d/udp", port, echo)}, nil, nil)
	a, err := net.Dial("udp", loopback(port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.Dial("udp", loopback(port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := udpRoundTrip(t, a, []byte("from a")); string(got) != "from a" {
		t.Fatalf("a got %q", got)
	}
	if got := udpRoundTrip(t, b, []byte("from b")); string(got) != "from b" {
		t.Fatalf("b got %q", got)
	}
	if s := ts.srv.Stats(); s.UDPSessions != 2 {
		t.Errorf("UDP sessions = %d, want one per local client (2)", s.UDPSessions)
	}
}

func TestRefusedDestinationResetsFast(t *testing.T) {
	ts := newTestServer(t, nil)
	c, clog := newTestClient(t, ts.url, testCred)
	closed := freePort(t, "tcp") // nothing listens there
	port := freePort(t, "tcp")
	runClient(t, c, []Forward{fwd(t, ParseLocal, "%d:127.0.0.1:%d", port, closed)}, nil, nil)
	conn := dialRetry(t, "tcp", loopback(port).String())
	defer conn.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := conn.Read(make([]byte, 1))
	if err == nil {
		t.Fatal("read succeeded, want the connection closed")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection to a refused destination hung")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed after %v, want fast", d)
	}
	waitFor(t, "the sidecar's reason in the log", func() bool {
		return strings.Contains(clog.String(), "connection refused") && strings.Contains(clog.String(), "status=502")
	})
}

func TestPolicy(t *testing.T) {
	ts := newTestServer(t, nil)
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoTCP(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, dst  string
		wantStatus int // 0: allowed
		wantReason string
	}{
		{"allowed loopback (positive control)", "127.0.0.1", 0, ""},
		{"allowed by name (positive control)", "localhost", 0, ""},
		{"denied address", "127.0.0.2", http.StatusForbidden, "deny_rule"},
		{"name resolving to a denied address", "denied.test", http.StatusForbidden, "deny_rule"},
		{"built-in class", "169.254.169.254", http.StatusForbidden, "metadata"},
		{"bad destination", "", http.StatusBadRequest, "want HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := tc.dst + ":" + strconv.Itoa(int(echo))
			if tc.dst == "" {
				dst = "nonsense"
			}
			ws, err := c.dial(ctx, PathTCP, url.Values{"dst": {dst}})
			if tc.wantStatus == 0 {
				if err != nil {
					t.Fatalf("dial %s: %v", dst, err)
				}
				_ = ws.CloseNow()
				return
			}
			var r *RefusedError
			if !errors.As(err, &r) || r.Status != tc.wantStatus || !strings.Contains(r.Reason, tc.wantReason) {
				t.Fatalf("dial %s: %v, want %d naming %q", dst, err, tc.wantStatus, tc.wantReason)
			}
		})
	}
	if s := ts.srv.Stats(); s.Denied != 3 {
		t.Errorf("denied = %d, want 3", s.Denied)
	}
}

func TestWrongCredential(t *testing.T) {
	ts := newTestServer(t, nil)
	c, _ := newTestClient(t, ts.url, "not-the-credential")
	err := c.Run(context.Background(), []Forward{fwd(t, ParseLocal, "%d:127.0.0.1:1", freePort(t, "tcp"))}, nil, nil)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "the sidecar refused the credential (401)") {
		t.Fatalf("Run = %v, want ErrUnauthorized", err)
	}
	err = c.Stdio(context.Background(), "127.0.0.1:1", strings.NewReader(""), io.Discard)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Stdio = %v, want ErrUnauthorized", err)
	}
	if s := ts.srv.Stats(); s.AuthFailures != 2 {
		t.Errorf("auth failures = %d, want 2", s.AuthFailures)
	}
}

func TestStdio(t *testing.T) {
	ts := newTestServer(t, nil)
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoTCP(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- c.Stdio(context.Background(), "localhost:"+strconv.Itoa(int(echo)), inR, outW) }()
	go func() {
		_, _ = inW.Write([]byte("ssh-2.0 hello"))
		_ = inW.Close()
	}()
	got, err := io.ReadAll(outR) // ends when the echo's half-close closes out
	if err != nil || string(got) != "ssh-2.0 hello" {
		t.Fatalf("got %q, %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
