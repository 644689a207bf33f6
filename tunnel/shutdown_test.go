package tunnel

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

func TestShutdownClosesEverything(t *testing.T) {
	pod := freePort(t, "tcp")
	ts := reverseServer(t, Port{pod, "tcp"})
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoTCP(t)
	local := freePort(t, "tcp")
	runClient(t, c,
		[]Forward{fwd(t, ParseLocal, "%d:127.0.0.1:%d", local, echo)},
		[]Forward{fwd(t, ParseRemote, "%d:127.0.0.1:%d", pod, echo)}, nil)

	fwdConn := dialRetry(t, "tcp", loopback(local).String())
	defer fwdConn.Close()
	revConn := dialRetry(t, "tcp", loopback(pod).String())
	defer revConn.Close()
	for _, conn := range []net.Conn{fwdConn, revConn} {
		if _, err := roundTrip(conn, []byte("up")); err != nil {
			t.Fatal(err)
		}
	}
	if a := ts.srv.Stats().Active; a != 3 {
		t.Fatalf("active = %d, want 3 (two streams and a control)", a)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	for _, conn := range []net.Conn{fwdConn, revConn} {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("stream still open after Shutdown: %v", err)
		}
	}
	if a := ts.srv.Stats().Active; a != 0 {
		t.Errorf("active = %d after Shutdown", a)
	}
	if conn, err := net.Dial("tcp", loopback(pod).String()); err == nil {
		conn.Close()
		t.Error("reverse listener still open after Shutdown")
	}
	_, err := c.dial(ctx, PathTCP, map[string][]string{"dst": {"127.0.0.1:1"}})
	var r *RefusedError
	if !errors.As(err, &r) || r.Status != http.StatusServiceUnavailable {
		t.Errorf("request after Shutdown: %v, want 503", err)
	}
}

// A data websocket whose carrier goes silent is found by its pings and
// the local connection is reset, instead of hanging forever.
func TestKeepaliveDetectsBlackhole(t *testing.T) {
	ts := newTestServer(t, nil)
	relay, err := faultrelay.New(ts.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	u, _ := wsproxy.ParseServerURL("ws://" + relay.Addr() + testPrefix)
	c, _ := newTestClient(t, u, testCred)
	echo := echoTCP(t)
	local := freePort(t, "tcp")
	runClient(t, c, []Forward{fwd(t, ParseLocal, "%d:127.0.0.1:%d", local, echo)}, nil, nil)
	conn := dialRetry(t, "tcp", loopback(local).String())
	defer conn.Close()
	if _, err := roundTrip(conn, []byte("alive")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // idle for three ping intervals: pings must not kill a live stream
	if _, err := roundTrip(conn, []byte("still alive")); err != nil {
		t.Fatalf("idle stream died: %v", err)
	}
	relay.Blackhole()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if err == nil || isTimeout(err) {
		t.Fatalf("read = %v, want the stream reset after missed pongs", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("detected after %v, want within a few ping intervals (1s)", d)
	}
	if err != io.EOF && !errors.Is(err, net.ErrClosed) {
		t.Logf("local side ended with %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
