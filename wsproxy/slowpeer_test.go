package wsproxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestSlowPeerDoesNotStallOtherPeers: while the server floods a peer that
// never reads, its queue drops and its write deadline closes its session;
// a second peer's datagrams keep flowing both ways during and after, and
// sends to it are never dropped.
func TestSlowPeerDoesNotStallOtherPeers(t *testing.T) {
	// Pings off, so that only the write deadline can end the slow session.
	ka := Keepalive{Interval: time.Hour, Timeout: time.Second, WriteTimeout: time.Second}
	var logs syncBuffer
	srv, hs := newTestServer(t, ServerConfig{Auth: twoPeers(), QueueLen: 4, Keepalive: ka,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rt := newRouter(t, srv)
	url := wsURL(t, hs).String()
	w := startWitness(t, dialPeer(t, url, witnessCred))
	slow := dialPeer(t, url, testCred) // never reads
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := slow.Write(ctx, websocket.MessageBinary, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "both peers' datagrams", func() bool {
		return rt.has("peer-a", "hello") && rt.n("witness") > 0
	})
	slowEP, witnessEP := rt.endpoint("peer-a"), rt.endpoint("witness")

	big := make([]byte, testMTU)
	start := time.Now()
	sent := 0
	for i := 0; time.Since(start) < 10*time.Second; i++ {
		if err := srv.Send([][]byte{big}, slowEP); err != nil {
			break // the write deadline closed the slow session
		}
		sent++
		if i%100 == 0 {
			// Interleaved sends to the witness all arrive.
			msg := fmt.Sprintf("to-witness-%d", i)
			if err := srv.Send([][]byte{[]byte(msg)}, witnessEP); err != nil {
				t.Fatal(err)
			}
			w.expect(t, msg, 5*time.Second)
		}
	}
	t.Logf("%d sends to the slow peer in %s; %d dropped", sent, time.Since(start).Round(time.Millisecond), srv.Stats().QueueDrops)
	if srv.Stats().QueueDrops == 0 {
		t.Fatal("no drops counted for a peer that does not read")
	}
	eventually(t, 5*time.Second, "the slow session closed", func() bool {
		p := srv.Peers()
		return len(p) == 1 && p[0] == "witness"
	})
	eventually(t, 5*time.Second, "the slow session to end by the write deadline", func() bool {
		return strings.Contains(logs.String(), errWriteTimeout.Error())
	})
	rt.progresses(t, "witness", 5*time.Second)
	if err := srv.Send([][]byte{[]byte("after")}, witnessEP); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "after", 5*time.Second)
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
