package netstack

import (
	"io"
	"net"
	"sync/atomic"

	"github.com/meshlaunch/meshlaunch/internal/relay"
)

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
	_, err := relay.Copy(countingWriter{dst, n}, src)
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

// countingWriter counts written bytes.
type countingWriter struct {
	w io.Writer
	n *atomic.Uint64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(uint64(n))
	return n, err
}
