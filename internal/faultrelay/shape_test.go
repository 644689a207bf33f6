package faultrelay

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestLatencyDelaysEveryChunkWithoutSerialising: with latency D on the way
// up, every message's echo comes back at least D after it was sent, in
// order and intact; many messages in flight at once all arrive within a
// few D, not one D each.
func TestLatencyDelaysEveryChunkWithoutSerialising(t *testing.T) {
	const d = 150 * time.Millisecond
	r := startRelay(t, echoServer(t))
	c := dial(t, r)
	if err := roundTrip(c, []byte("control"), time.Second); err != nil {
		t.Fatalf("positive control: the relay does not relay: %v", err)
	}
	start := time.Now()
	if err := roundTrip(c, []byte("before"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt >= d {
		t.Fatalf("without latency a round trip takes %v, so the test cannot see %v", rtt, d)
	}

	r.SetShape(Up, Shape{Latency: d})
	const n, size = 40, 1024
	sent := make([]time.Time, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			msg := make([]byte, size)
			binary.BigEndian.PutUint32(msg, uint32(i))
			sent[i] = time.Now()
			if _, err := c.Write(msg); err != nil {
				t.Errorf("write %d: %v", i, err)
				return
			}
			time.Sleep(5 * time.Millisecond) // separate reads at the relay
		}
	})
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, size)
	var late time.Duration
	for i := range n {
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		arrived := time.Now()
		wg.Wait() // sent[i] was written before the message left
		if seq := binary.BigEndian.Uint32(got); seq != uint32(i) {
			t.Fatalf("echo %d carries sequence %d: out of order", i, seq)
		}
		if delay := arrived.Sub(sent[i]); delay < d {
			t.Errorf("message %d came back after %v, want at least the latency %v", i, delay, d)
		} else {
			late = max(late, delay)
		}
	}
	total := time.Since(start)
	if w := r.Stats(Up).Writes; w < n/2 {
		t.Fatalf("the relay wrote the %d messages in %d writes: they were not in flight separately", n, w)
	}
	// One chunk per D would take n*D (6 s); the sender needs n*5 ms.
	if total > n*5*time.Millisecond+10*d {
		t.Errorf("%d messages 5 ms apart took %v with %v latency: chunks are serialised", n, total, d)
	}
	t.Logf("%d messages, latency %v: slowest round trip %v, all in %v", n, d, late, total)
}

// TestThrottleHoldsTheRate: a copy through a throttled direction runs at
// the set rate within a band, each direction on its own bucket, while
// the same copy unthrottled is several times faster.
func TestThrottleHoldsTheRate(t *testing.T) {
	const rate, size = 250_000, 500_000 // 2 s
	addr, conns := heldServer(t)
	r := startRelay(t, addr)

	if d := copyBothWays(t, r, conns, size); d > size*time.Second/rate/4 {
		t.Fatalf("positive control: %d bytes unthrottled took %v", size, d)
	}
	r.SetShape(Up, Shape{Rate: rate})
	r.SetShape(Down, Shape{Rate: rate})
	d := copyBothWays(t, r, conns, size)
	want := time.Duration(size) * time.Second / rate
	lo := time.Duration(size-burstBytes(rate)) * time.Second / rate * 95 / 100
	hi := want*3/2 + 500*time.Millisecond // a loaded machine may be slow, never fast
	if d < lo || d > hi {
		t.Errorf("%d bytes each way at %d B/s took %v, want %v (between %v and %v)", size, rate, d, want, lo, hi)
	}
	t.Logf("%d bytes each way at %d B/s: %v (%.0f B/s)", size, rate, d, float64(size)/d.Seconds())
}

// copyBothWays sends size bytes up and size bytes down at once through a
// new connection and returns how long the slower direction took; the
// data must arrive byte-exact.
func copyBothWays(t *testing.T, r *Relay, conns <-chan net.Conn, size int) time.Duration {
	t.Helper()
	c := dial(t, r)
	s := accepted(t, conns)
	data := pattern(size)
	start := time.Now()
	var wg sync.WaitGroup
	for _, dir := range []struct{ from, to net.Conn }{{c, s}, {s, c}} {
		wg.Go(func() {
			if _, err := dir.from.Write(data); err != nil {
				t.Errorf("write: %v", err)
			}
		})
		wg.Go(func() {
			_ = dir.to.SetReadDeadline(time.Now().Add(30 * time.Second))
			got := make([]byte, size)
			if _, err := io.ReadFull(dir.to, got); err != nil {
				t.Errorf("read: %v", err)
			} else if !bytes.Equal(got, data) {
				t.Error("the copy arrived corrupted")
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return time.Since(start)
}

// TestSliceCutsWrites: with slicing, one 64 KiB write leaves the relay in
// writes of at most N bytes and arrives byte-exact; unsliced, the same
// data takes far fewer writes.
func TestSliceCutsWrites(t *testing.T) {
	const size, slice = 64 << 10, 7
	r := startRelay(t, echoServer(t))
	c := dial(t, r)
	msg := pattern(size)
	if err := roundTrip(c, msg, 10*time.Second); err != nil {
		t.Fatalf("unsliced: %v", err)
	}
	before, beforeDown := r.Stats(Up), r.Stats(Down)
	if before.Writes >= size/slice {
		t.Fatalf("positive control: unsliced, %d bytes took %d writes", size, before.Writes)
	}
	r.SetShape(Up, Shape{Slice: slice})
	r.SetShape(Down, Shape{Slice: 100})
	if err := roundTrip(c, msg, 30*time.Second); err != nil {
		t.Fatalf("sliced: %v", err)
	}
	up, down := r.Stats(Up), r.Stats(Down)
	if w := up.Writes - before.Writes; w < (size+slice-1)/slice {
		t.Errorf("up: %d bytes in %d writes, want at least %d (slices of %d)", size, w, (size+slice-1)/slice, slice)
	}
	if got := up.Bytes - before.Bytes; got != size {
		t.Errorf("up: relay wrote %d bytes, want %d", got, size)
	}
	if w := down.Writes - beforeDown.Writes; w < (size+99)/100 {
		t.Errorf("down: %d bytes in %d writes, want at least %d (slices of 100)", size, w, (size+99)/100)
	}
}
