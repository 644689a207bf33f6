package tunnel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// reverseServer allows -R on the given ports, bound to 127.0.0.1.
func reverseServer(t *testing.T, ports ...Port) *testServer {
	return newTestServer(t, func(c *ServerConfig) {
		c.ReversePorts = ports
		c.ReverseHost = "127.0.0.1"
	})
}

func TestReverseTCP(t *testing.T) {
	pod := freePort(t, "tcp")
	ts := reverseServer(t, Port{pod, "tcp"})
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoTCP(t)
	runClient(t, c, nil, []Forward{fwd(t, ParseRemote, "%d:localhost:%d", pod, echo)}, nil)

	conn := dialRetry(t, "tcp", loopback(pod).String()).(*net.TCPConn)
	defer conn.Close()
	got, err := sendAndEcho(conn, []byte("through the reverse path"))
	if err != nil || string(got) != "through the reverse path" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestReverseDisallowedPort(t *testing.T) {
	allowed := freePort(t, "tcp")
	ts := reverseServer(t, Port{allowed, "tcp"}, Port{5353, "udp"})
	c, _ := newTestClient(t, ts.url, testCred)
	other := freePort(t, "tcp")

	_, err := c.dial(context.Background(), PathReverse, url.Values{"port": {strconv.Itoa(int(other))}, "proto": {"tcp"}})
	var r *RefusedError
	want := fmt.Sprintf("allowed: %d/tcp, 5353/udp", allowed)
	if !errors.As(err, &r) || r.Status != http.StatusForbidden || !strings.Contains(r.Reason, want) {
		t.Fatalf("register port %d: %v, want 403 naming %q", other, err, want)
	}
	// Run gives up at once: retrying cannot fix the configuration.
	err = c.Run(context.Background(), nil, []Forward{fwd(t, ParseRemote, "%d:localhost:22", other)}, nil)
	if !errors.As(err, &r) || r.Status != http.StatusForbidden {
		t.Fatalf("Run = %v, want the 403", err)
	}
	if ln, err := net.Listen("tcp", loopback(other).String()); err != nil {
		t.Errorf("the refused port is in use on the pod: %v", err)
	} else {
		ln.Close()
	}
}

func TestReverseProxyProtocol(t *testing.T) {
	pod := freePort(t, "tcp")
	ts := reverseServer(t, Port{pod, "tcp"})
	c, _ := newTestClient(t, ts.url, testCred)
	headers := make(chan string, 1)
	local := serveTCP(t, "127.0.0.1:0", func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		headers <- line
		_, _ = io.Copy(c, br)
	})
	f := fwd(t, ParseRemote, "%d:127.0.0.1:%d", pod, local)
	f.ProxyProtocol = true
	runClient(t, c, nil, []Forward{f}, nil)

	conn := dialRetry(t, "tcp", loopback(pod).String())
	defer conn.Close()
	if got, err := roundTrip(conn, []byte("payload")); err != nil || string(got) != "payload" {
		t.Fatalf("got %q, %v", got, err)
	}
	src := conn.LocalAddr().(*net.TCPAddr)
	want := fmt.Sprintf("PROXY TCP4 127.0.0.1 127.0.0.1 %d %d\r\n", src.Port, pod)
	if got := <-headers; got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
}

func TestReverseReconnectsAfterReset(t *testing.T) {
	pod := freePort(t, "tcp")
	ts := reverseServer(t, Port{pod, "tcp"})
	relay, err := faultrelay.New(ts.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	u, _ := wsproxy.ParseServerURL("ws://" + relay.Addr() + testPrefix)
	c, clog := newTestClient(t, u, testCred)
	echo := echoTCP(t)
	runClient(t, c, nil, []Forward{fwd(t, ParseRemote, "%d:127.0.0.1:%d", pod, echo)}, nil)

	check := func(msg string) {
		t.Helper()
		conn := dialRetry(t, "tcp", loopback(pod).String())
		defer conn.Close()
		if got, err := roundTrip(conn, []byte(msg)); err != nil || string(got) != msg {
			t.Fatalf("got %q, %v", got, err)
		}
	}
	check("before the reset")
	waitFor(t, "one registration", func() bool { return ts.srv.Stats().Reverse == 1 })
	relay.Reset()
	waitFor(t, "a second registration", func() bool { return ts.srv.Stats().Reverse == 2 })
	check("after the reset")
	if !strings.Contains(clog.String(), "reverse control connection lost; reconnecting") {
		t.Error("the reconnect was not logged")
	}
}

func TestReverseReplacesOlderRegistration(t *testing.T) {
	pod := freePort(t, "tcp")
	ts := reverseServer(t, Port{pod, "tcp"})
	c, _ := newTestClient(t, ts.url, testCred)
	q := url.Values{"port": {strconv.Itoa(int(pod))}, "proto": {"tcp"}}
	first, err := c.dial(context.Background(), PathReverse, q)
	if err != nil {
		t.Fatal(err)
	}
	defer first.CloseNow()
	second, err := c.dial(context.Background(), PathReverse, q)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	defer second.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err = first.Read(ctx)
	if code := websocketCloseStatus(err); code != StatusReplaced {
		t.Fatalf("first control closed with %v (%v), want StatusReplaced", code, err)
	}
}

func TestReverseUDP(t *testing.T) {
	pod := freePort(t, "udp")
	ts := reverseServer(t, Port{pod, "udp"})
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoUDP(t)
	runClient(t, c, nil, []Forward{fwd(t, ParseRemote, "%d:127.0.0.1:%d/udp", pod, echo)}, nil)
	waitFor(t, "the registration", func() bool { return ts.srv.Stats().Reverse == 1 })
	conn, err := net.Dial("udp", loopback(pod).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := udpRoundTrip(t, conn, []byte("udp reverse")); string(got) != "udp reverse" {
		t.Fatalf("got %q", got)
	}
}
