package relay

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// scriptedReader returns the given read sizes in turn (bounded by the
// caller's buffer) from data, and records the buffer size of every Read.
type scriptedReader struct {
	data  []byte
	sizes []int
	asked []int
}

func (r *scriptedReader) Read(p []byte) (int, error) {
	r.asked = append(r.asked, len(p))
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(r.sizes) > 0 {
		n = min(n, r.sizes[0])
		r.sizes = r.sizes[1:]
	}
	n = copy(p, r.data[:min(n, len(r.data))])
	r.data = r.data[n:]
	return n, nil
}

// A read that fills the small buffer moves the flow to the large one; a
// read that would have fit the small one moves it back. The bytes arrive
// in order either way.
func TestCopyGrowsForBulkAndShrinksWhenQuiet(t *testing.T) {
	data := make([]byte, 2*LargeBuf+SmallBuf+100)
	for i := range data {
		data[i] = byte(i % 253)
	}
	r := &scriptedReader{data: data, sizes: []int{
		SmallBuf, // fills the small buffer: grow
		LargeBuf, // bulk
		100,      // a trickle: shrink
		SmallBuf, // fills again: grow
		LargeBuf, // bulk until EOF
	}}
	var out bytes.Buffer
	n, err := Copy(&out, r)
	if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("copied %d of %d bytes (err %v), equal %v", n, len(data), err, bytes.Equal(out.Bytes(), data))
	}
	want := []int{SmallBuf, LargeBuf, LargeBuf, SmallBuf, LargeBuf}
	for i, w := range want {
		if i >= len(r.asked) || r.asked[i] != w {
			t.Fatalf("buffer sizes of the reads: %v, want them to start with %v", r.asked, want)
		}
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// Errors say which side failed and keep the cause.
func TestCopyErrorsNameTheSide(t *testing.T) {
	cause := errors.New("boom")
	_, err := Copy(failingWriter{cause}, bytes.NewReader([]byte("x")))
	if !errors.Is(err, cause) || err.Error() != "write: boom" {
		t.Errorf("write failure: %v", err)
	}
	_, err = Copy(io.Discard, failingReader{cause})
	if !errors.Is(err, cause) || err.Error() != "read: boom" {
		t.Errorf("read failure: %v", err)
	}
}

// At most MaxLargeBufs copies hold a large buffer at once: with every
// slot taken a bulk flow keeps reading into the small buffer, and once a
// slot is free it grows again (the positive control).
func TestCopyBoundsLargeBuffers(t *testing.T) {
	var held []*[]byte
	for range MaxLargeBufs {
		b := getLarge()
		if b == nil {
			t.Fatalf("only %d large buffers available, want %d", len(held), MaxLargeBufs)
		}
		held = append(held, b)
	}
	defer func() {
		for _, b := range held {
			putLarge(b)
		}
	}()
	if b := getLarge(); b != nil {
		putLarge(b)
		t.Fatalf("a large buffer beyond the %d in use", MaxLargeBufs)
	}

	data := make([]byte, 4*SmallBuf)
	r := &scriptedReader{data: data}
	if n, err := Copy(io.Discard, r); err != nil || n != int64(len(data)) {
		t.Fatalf("copied %d of %d bytes with no large buffer free: %v", n, len(data), err)
	}
	for i, size := range r.asked {
		if size != SmallBuf {
			t.Fatalf("read %d asked for %d bytes with no large buffer free, want %d: %v", i, size, SmallBuf, r.asked)
		}
	}

	putLarge(held[len(held)-1])
	held = held[:len(held)-1]
	r = &scriptedReader{data: data}
	if _, err := Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	if len(r.asked) < 2 || r.asked[1] != LargeBuf {
		t.Fatalf("with a large buffer free the reads asked for %v, want %d then %d", r.asked, SmallBuf, LargeBuf)
	}
	if b := getLarge(); b != nil { // Copy gave its buffer back
		putLarge(b)
	} else {
		t.Fatal("Copy kept its large buffer after returning")
	}
}
