package relay

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// The buffer sizes of Copy. A flow waiting in Read holds its buffer, so
// idle and interactive flows (the many) keep a small one; a bulk flow
// moves to a large one, which takes a quarter of the syscalls per byte of
// 64 KiB reads on both of its sockets (a netstack segment is up to 64 KiB
// with the default MTU, and a kernel socket has more than that queued).
const (
	SmallBuf = 32 << 10
	LargeBuf = 256 << 10
)

// MaxLargeBufs bounds the large buffers in use at once, process-wide
// (16 MiB): a bulk flow blocked in Write holds its buffer full, so a
// thousand slow flows could hold 250 MiB. A flow that finds none free
// stays on the small buffer and tries again on its next full read.
const MaxLargeBufs = 64

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, SmallBuf); return &b }}
	largeBufs = sync.Pool{New: func() any { b := make([]byte, LargeBuf); return &b }}
	// largeSlots holds a token per large buffer in use.
	largeSlots = make(chan struct{}, MaxLargeBufs)
)

// getLarge takes a large buffer if fewer than MaxLargeBufs are in use,
// else returns nil.
func getLarge() *[]byte {
	select {
	case largeSlots <- struct{}{}:
		return largeBufs.Get().(*[]byte)
	default:
		return nil
	}
}

// putLarge returns a buffer from getLarge.
func putLarge(b *[]byte) {
	largeBufs.Put(b)
	<-largeSlots
}

// Copy copies src to dst until EOF, like io.Copy without ReadFrom and
// WriteTo, through pooled buffers: a read that fills the small buffer
// moves the flow to a large one if one is free (MaxLargeBufs), and a read
// that would have fit the small one moves it back. It returns the bytes
// written and the first error other than EOF, saying which side failed.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	small := smallBufs.Get().(*[]byte)
	defer smallBufs.Put(small)
	var large *[]byte
	defer func() {
		if large != nil {
			putLarge(large)
		}
	}()
	buf := *small
	var total int64
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			total += int64(w)
			if werr == nil && w < n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return total, fmt.Errorf("write: %w", werr)
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return total, nil
			}
			return total, fmt.Errorf("read: %w", rerr)
		}
		switch {
		case large == nil && n == len(buf):
			if large = getLarge(); large != nil {
				buf = *large
			}
		case large != nil && n <= SmallBuf:
			putLarge(large)
			large, buf = nil, *small
		}
	}
}
