package netstack

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// spliceBufSize is the copy buffer of one direction of a forwarded TCP flow.
// Buffers are pooled; a flow holds two while it lives.
const spliceBufSize = 32 << 10

var spliceBufs = sync.Pool{New: func() any { b := make([]byte, spliceBufSize); return &b }}

// closeWriter is a conn that can half-close.
type closeWriter interface{ CloseWrite() error }

// splice copies inner->outer and outer->inner until both directions end and
// then closes both conns. A direction that reaches EOF half-closes its
// destination; one that fails closes both conns, which ends the other. It
// blocks; one direction runs on an owned goroutine.
func (s *Stack) splice(inner, outer net.Conn) {
	untrack := s.track(inner, outer)
	defer untrack()
	defer outer.Close()
	defer inner.Close()
	done := make(chan struct{})
	if !s.goOwned(func() {
		defer close(done)
		pipe(inner, outer, &s.stats.bytesOut)
	}) {
		return
	}
	pipe(outer, inner, &s.stats.bytesIn)
	<-done
}

// pipe copies src to dst, adding the bytes to n.
func pipe(dst, src net.Conn, n *atomic.Uint64) {
	bp := spliceBufs.Get().(*[]byte)
	defer spliceBufs.Put(bp)
	_, err := io.CopyBuffer(countingWriter{dst, n}, readerOnly{src}, *bp)
	if err == nil {
		// EOF: pass the half-close on. A conn that cannot half-close stays
		// open until the other direction ends.
		if cw, ok := dst.(closeWriter); !ok || cw.CloseWrite() == nil {
			return
		}
	}
	// A failed direction ends the whole flow.
	dst.Close()
	src.Close()
}

// readerOnly hides a conn's WriterTo so io.CopyBuffer uses the pooled buffer.
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

// countingWriter counts written bytes and hides the conn's ReaderFrom.
type countingWriter struct {
	w io.Writer
	n *atomic.Uint64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(uint64(n))
	return n, err
}
