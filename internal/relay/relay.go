// Package relay moves bytes between connections: a TCP splice with
// half-close, and a UDP front that keeps one session per client address.
// The sidecar's ingress and the launcher's published ports use it.
package relay

import (
	"context"
	"net"
	"sync"
)

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
	_, err := Copy(dst, src)
	if err == nil {
		if cw, ok := dst.(closeWriter); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	src.Close()
}
