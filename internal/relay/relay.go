// Package relay moves bytes between connections: a TCP splice with
// half-close, and a UDP front that keeps one session per client address.
// The sidecar's ingress and the launcher's published ports use it.
package relay

import (
	"context"
	"io"
	"net"
	"sync"
)

const bufSize = 32 << 10

var bufs = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

type closeWriter interface{ CloseWrite() error }

// Splice copies a→b and b→a until both directions end or ctx does, then
// closes both. EOF in one direction half-closes the other side; an error
// ends both. It blocks; one direction runs on a goroutine it waits for.
func Splice(ctx context.Context, a, b net.Conn) {
	stop := context.AfterFunc(ctx, func() { a.Close(); b.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { pipe(b, a) })
	pipe(a, b)
	wg.Wait()
	a.Close()
	b.Close()
}

func pipe(dst, src net.Conn) {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	_, err := io.CopyBuffer(writerOnly{dst}, readerOnly{src}, *bp)
	if err == nil {
		if cw, ok := dst.(closeWriter); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	src.Close()
}

// readerOnly and writerOnly hide ReadFrom/WriteTo so the pooled buffer is used.
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }
