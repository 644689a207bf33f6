package wsproxy

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestOversizedMessageClosesOnlyThatSession: an authenticated peer that
// sends a 5 MB message gets close 1009 (coder/websocket's read limit sends
// StatusMessageTooBig itself) without the server buffering the message,
// while a second peer's session passes datagrams both ways during and
// after.
func TestOversizedMessageClosesOnlyThatSession(t *testing.T) {
	srv, hs, _ := newCountingServer(t, ServerConfig{Auth: twoPeers(), Keepalive: fastKeepalive})
	rt := newRouter(t, srv)
	url := wsURL(t, hs).String()
	w := startWitness(t, dialPeer(t, url, witnessCred))
	rt.progresses(t, "witness", 5*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := dialPeer(t, url, testCred)
	// Positive control: a message at the limit is delivered.
	atLimit := make([]byte, ReadLimit(testMTU))
	atLimit[0] = 'L'
	if err := a.Write(ctx, websocket.MessageBinary, atLimit); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the at-limit message", func() bool { return rt.has("peer-a", string(atLimit)) })

	huge := make([]byte, 5<<20)
	before := totalAlloc()
	writeDone := make(chan error, 1)
	go func() { writeDone <- a.Write(ctx, websocket.MessageBinary, huge) }()
	_, _, err := a.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("close status %v (%v), want 1009", got, err)
	}
	<-writeDone // fails or ends once the server closed
	grew := totalAlloc() - before
	t.Logf("allocated %d KiB while a 5 MiB message was refused", grew>>10)
	if grew > 2<<20 {
		t.Errorf("the server allocated %d KiB for a refused 5 MiB message", grew>>10)
	}
	eventually(t, 5*time.Second, "peer-a's session gone", func() bool { return len(srv.Peers()) == 1 })

	// The witness kept going and still works both ways.
	rt.progresses(t, "witness", 5*time.Second)
	if err := srv.Send([][]byte{[]byte("to-witness")}, rt.endpoint("witness")); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "to-witness", 5*time.Second)
	if rt.has("peer-a", string(huge[:ReadLimit(testMTU)])) {
		t.Fatal("part of the oversized message was delivered")
	}
}

// totalAlloc is the cumulative bytes allocated on the heap by the process.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}
