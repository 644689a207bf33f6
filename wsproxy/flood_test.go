package wsproxy

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// floodFrames is how many frames each flood sends.
const floodFrames = 100_000

// TestFloodsEndOrCostNothing sends, on one authenticated session, the
// floods a websocket server must survive while a second peer keeps
// passing datagrams: many small continuation frames (the message outgrows
// the read limit: close 1009), many empty continuation frames (a message
// that never ends: closed by the message timeout) and many empty messages
// (dropped: they carry no datagram). Afterwards the goroutines and the
// heap are back where they were.
func TestFloodsEndOrCostNothing(t *testing.T) {
	// No pings (the raw client does not answer them): only the message
	// timeout, which is the pong timeout, can end a stuck message.
	ka := Keepalive{Interval: time.Hour, Timeout: time.Second, WriteTimeout: time.Second}
	srv, hs := newTestServer(t, ServerConfig{Auth: twoPeers(), Keepalive: ka})
	rt := newRouter(t, srv)
	w := startWitness(t, dialPeer(t, wsURL(t, hs).String(), witnessCred))
	rt.progresses(t, "witness", 5*time.Second)
	baseG, baseHeap := netGoroutines(), heapInUse()

	t.Run("small continuation frames", func(t *testing.T) {
		ws := dialRaw(t, hs, testCred)
		flood := frame(false, opBinary, []byte("x"))
		for range floodFrames {
			flood = append(flood, frame(false, opContinuation, []byte("x"))...)
		}
		go func() { _ = ws.write(flood) }() // the server closes midway
		code, err := ws.closeCode(10 * time.Second)
		if code != int(websocket.StatusMessageTooBig) {
			t.Fatalf("close code %d (%v), want 1009", code, err)
		}
	})
	t.Run("empty continuation frames", func(t *testing.T) {
		ws := dialRaw(t, hs, testCred)
		// Positive control: a message split into fragments is delivered.
		ok := append(frame(false, opBinary, []byte("frag")), frame(false, opContinuation, nil)...)
		ok = append(ok, frame(true, opContinuation, []byte("mented"))...)
		if err := ws.write(ok); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the fragmented message", func() bool { return rt.has("peer-a", "fragmented") })
		flood := frame(false, opBinary, []byte("y"))
		for range floodFrames {
			flood = append(flood, frame(false, opContinuation, nil)...)
		}
		if err := ws.write(flood); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// The message never ends; the server gives up after the
		// keepalive timeout without a close frame.
		if code, err := ws.closeCode(10 * time.Second); code != -1 || isTimeout(err) {
			t.Fatalf("close code %d (%v), want the connection dropped", code, err)
		}
		t.Logf("unfinished message dropped after %s", time.Since(start).Round(time.Millisecond))
	})
	t.Run("slow message", func(t *testing.T) {
		// The other side of the message timeout: a message whose payload
		// keeps arriving, one byte per 300 ms, outlives the timeout.
		ws := dialRaw(t, hs, testCred)
		if err := ws.write(frame(false, opBinary, []byte("s"))); err != nil {
			t.Fatal(err)
		}
		slow := []byte("lowly-arriving")
		start := time.Now()
		for i, b := range slow {
			time.Sleep(300 * time.Millisecond)
			if err := ws.write(frame(i == len(slow)-1, opContinuation, []byte{b})); err != nil {
				t.Fatalf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
			}
		}
		eventually(t, 5*time.Second, "the slow message", func() bool { return rt.has("peer-a", "slowly-arriving") })
		ws.c.Close()
	})
	t.Run("empty messages", func(t *testing.T) {
		ws := dialRaw(t, hs, testCred)
		flood := bytes.Repeat(frame(true, opBinary, nil), floodFrames)
		flood = append(flood, frame(true, opBinary, []byte("after-empties"))...)
		if err := ws.write(flood); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the datagram after the empty messages", func() bool { return rt.has("peer-a", "after-empties") })
		ws.c.Close()
	})

	rt.progresses(t, "witness", 5*time.Second)
	if err := srv.Send([][]byte{[]byte("to-witness")}, rt.endpoint("witness")); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "to-witness", 5*time.Second)
	eventually(t, 10*time.Second, "connection goroutines back to baseline", func() bool { return netGoroutines() <= baseG })
	runtime.GC()
	if grew := int64(heapInUse()) - int64(baseHeap); grew > 8<<20 {
		t.Fatalf("heap in use grew by %d KiB after the floods", grew>>10)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func isTimeout(err error) bool {
	ne, ok := err.(interface{ Timeout() bool })
	return ok && ne.Timeout()
}
