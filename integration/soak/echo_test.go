package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// echoOp sends n pattern bytes at transferRate to a TCP echo server at
// addr, half-closes, and checks that exactly the same n bytes come back:
// the upload direction, job to cluster, byte-checked.
func echoOp(dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, n int64) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		c, err := dial(ctx, "tcp", addr)
		if err != nil {
			return 0, fmt.Errorf("echo %s: %w", addr, err)
		}
		defer c.Close()
		stop := context.AfterFunc(ctx, func() { c.Close() }) // unblocks both directions
		defer stop()
		var wg sync.WaitGroup
		var werr error
		wg.Go(func() { werr = sendPattern(ctx, c, n) })
		rerr := nstest.VerifyPattern(c, n)
		if rerr != nil {
			c.Close() // the sender may be blocked on a peer that stopped echoing
		}
		wg.Wait()
		if err := errors.Join(werr, rerr); err != nil {
			return 0, fmt.Errorf("echo %s: %w", addr, err)
		}
		return n, nil
	}
}

// sendPattern writes n pattern bytes at transferRate, then half-closes.
func sendPattern(ctx context.Context, c net.Conn, n int64) error {
	src := newPacedReader(ctx, io.LimitReader(&patternReader{}, n), transferRate)
	if _, err := io.Copy(c, src); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("send: %T cannot half-close", c)
	}
	if err := cw.CloseWrite(); err != nil {
		return fmt.Errorf("half-close: %w", err)
	}
	return nil
}
