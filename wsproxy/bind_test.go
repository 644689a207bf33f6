package wsproxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
	"golang.zx2c4.com/wireguard/conn"
)

func TestDatagramsBothWays(t *testing.T) {
	srv, hs := newTestServer(t, ServerConfig{Keepalive: fastKeepalive})
	srecv := opened(t, srv)
	defer srv.Close()
	cli := newTestClient(t, hs, nil)
	crecv := opened(t, cli)
	waitConnected(t, cli)

	if err := cli.Send([][]byte{[]byte("ping-1"), []byte("ping-2")}, nil); err != nil {
		t.Fatal(err)
	}
	got1, ep := recvOne(t, srecv, 5*time.Second)
	got2, _ := recvOne(t, srecv, 5*time.Second)
	if string(got1) != "ping-1" || string(got2) != "ping-2" {
		t.Fatalf("server got %q %q, want ping-1 ping-2 in order", got1, got2)
	}
	if err := srv.Send([][]byte{[]byte("pong")}, ep); err != nil {
		t.Fatal(err)
	}
	got, _ := recvOne(t, crecv, 5*time.Second)
	if string(got) != "pong" {
		t.Fatalf("client got %q", got)
	}
	if p := srv.Peers(); len(p) != 1 || p[0] != "peer-a" {
		t.Fatalf("Peers() = %v", p)
	}
}

func TestReceiveReturnsErrClosedAfterClose(t *testing.T) {
	srv, hs := newTestServer(t, ServerConfig{})
	cli := newTestClient(t, hs, nil)
	recvS := opened(t, srv)
	recvC := opened(t, cli)
	errs := make(chan error, 2)
	go func() { _, err := recvS(make([][]byte, 1), make([]int, 1), make([]conn.Endpoint, 1)); errs <- err }()
	go func() { _, err := recvC(make([][]byte, 1), make([]int, 1), make([]conn.Endpoint, 1)); errs <- err }()
	time.Sleep(50 * time.Millisecond)
	srv.Close()
	cli.Close()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("receive after Close = %v, want net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("receive did not return after Close")
		}
	}
	// The device closes and reopens the bind when it goes up.
	if _, _, err := cli.Open(0); err != nil {
		t.Fatalf("reopen client: %v", err)
	}
	if _, _, err := cli.Open(0); err == nil {
		t.Fatal("second Open without Close succeeded")
	}
	waitConnected(t, cli)
}

func TestReconnectAfterReset(t *testing.T) {
	srv, hs := newTestServer(t, ServerConfig{Keepalive: fastKeepalive})
	srecv := opened(t, srv)
	defer srv.Close()
	relay, err := faultrelay.New(hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	var connects atomic.Int32
	cli := newTestClient(t, hs, func(c *ClientConfig) {
		c.URL.Host = relay.Addr()
		c.OnConnect = func() { connects.Add(1) }
	})
	opened(t, cli)
	waitConnected(t, cli)

	relay.Reset() // RST on the TCP connection under the websocket
	eventually(t, 5*time.Second, "second connect", func() bool { return connects.Load() >= 2 })
	waitConnected(t, cli)
	if err := cli.Send([][]byte{[]byte("after")}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := recvOne(t, srecv, 5*time.Second)
	if string(got) != "after" {
		t.Fatalf("got %q after reconnect", got)
	}
	if st := cli.Stats(); st.Connects < 2 || !st.Connected {
		t.Fatalf("stats %+v", st)
	}
}

func TestNewerSessionReplacesOlder(t *testing.T) {
	srv, hs := newTestServer(t, ServerConfig{Keepalive: fastKeepalive})
	srecv := opened(t, srv)
	defer srv.Close()
	ctx := context.Background()
	dial := func() *websocket.Conn {
		ws, _, err := websocket.Dial(ctx, wsURL(t, hs).String(), &websocket.DialOptions{
			HTTPHeader:   map[string][]string{"Authorization": {"Bearer " + testCred}},
			Subprotocols: []string{Subprotocol},
		})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	old := dial()
	defer old.CloseNow()
	eventually(t, 5*time.Second, "first session", func() bool { return srv.Stats().Sessions == 1 })
	cur := dial()
	defer cur.CloseNow()
	_, _, err := old.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("old session read = %v, want close 1008", err)
	}
	if err := cur.Write(ctx, websocket.MessageBinary, []byte("from-new")); err != nil {
		t.Fatal(err)
	}
	got, _ := recvOne(t, srecv, 5*time.Second)
	if string(got) != "from-new" {
		t.Fatalf("got %q", got)
	}
	if st := srv.Stats(); st.Replaced != 1 || st.Sessions != 1 {
		t.Fatalf("stats %+v, want 1 replaced, 1 live", st)
	}
}

func TestProtocolViolationsCloseSession(t *testing.T) {
	cases := []struct {
		name string
		typ  websocket.MessageType
		size int
		want websocket.StatusCode
	}{
		{"oversized binary", websocket.MessageBinary, ReadLimit(testMTU) + 1, websocket.StatusMessageTooBig},
		{"text message", websocket.MessageText, 10, websocket.StatusUnsupportedData},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, hs := newTestServer(t, ServerConfig{})
			ctx := context.Background()
			ws, _, err := websocket.Dial(ctx, wsURL(t, hs).String(), &websocket.DialOptions{
				HTTPHeader:   map[string][]string{"Authorization": {"Bearer " + testCred}},
				Subprotocols: []string{Subprotocol},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			// Positive control: a message at the limit is accepted.
			if err := ws.Write(ctx, websocket.MessageBinary, make([]byte, ReadLimit(testMTU))); err != nil {
				t.Fatal(err)
			}
			if err := ws.Write(ctx, tc.typ, bytes.Repeat([]byte("x"), tc.size)); err != nil {
				t.Fatal(err)
			}
			_, _, err = ws.Read(ctx)
			if got := websocket.CloseStatus(err); got != tc.want {
				t.Fatalf("close status %v (%v), want %v", got, err, tc.want)
			}
			eventually(t, 5*time.Second, "session gone", func() bool { return srv.Stats().Sessions == 0 })
			if st := srv.Stats(); st.BytesIn < uint64(ReadLimit(testMTU)) {
				t.Fatalf("the message at the limit was not read: %+v", st)
			}
		})
	}
}

func TestSlowPeerDropsInsteadOfBlocking(t *testing.T) {
	srv, hs := newTestServer(t, ServerConfig{QueueLen: 4, Keepalive: fastKeepalive})
	srecv := opened(t, srv)
	defer srv.Close()
	ctx := context.Background()
	// A peer that never reads: its TCP window fills, then its queue.
	ws, _, err := websocket.Dial(ctx, wsURL(t, hs).String(), &websocket.DialOptions{
		HTTPHeader:   map[string][]string{"Authorization": {"Bearer " + testCred}},
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	_, ep := recvOne(t, srecv, 5*time.Second)
	big := make([]byte, testMTU)
	start := time.Now()
	for range 10000 {
		if err := srv.Send([][]byte{big}, ep); err != nil {
			break // session closed by its write deadline
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Send blocked for %s on a slow peer", d)
	}
	if srv.Stats().QueueDrops == 0 {
		t.Fatal("no drops counted for a peer that does not read")
	}
	// The write deadline ends the stuck session.
	eventually(t, 5*time.Second, "stuck session closed", func() bool { return srv.Stats().Sessions == 0 })
}

func TestBlackholeDetectedByPings(t *testing.T) {
	_, hs := newTestServer(t, ServerConfig{Keepalive: fastKeepalive})
	relay, err := faultrelay.New(hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	var connects atomic.Int32
	cli := newTestClient(t, hs, func(c *ClientConfig) {
		c.URL.Host = relay.Addr()
		c.OnConnect = func() { connects.Add(1) }
	})
	opened(t, cli)
	waitConnected(t, cli)
	relay.Blackhole() // no FIN, no RST: only a missing pong tells
	eventually(t, 10*time.Second, "reconnect after blackhole", func() bool { return connects.Load() >= 2 })
}
