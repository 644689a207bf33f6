package tunnel

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
)

// tcpForward is a -L TCP listener: one websocket per accepted connection.
type tcpForward struct {
	c   *Client
	dst string
	ln  net.Listener
}

func (t *tcpForward) close() { _ = t.ln.Close() }

func (t *tcpForward) serve(ctx context.Context, wg *sync.WaitGroup) {
	acceptLoop(t.ln, wg, func(conn net.Conn) {
		_ = t.c.forward(ctx, conn.(*net.TCPConn), t.dst)
	})
}

// forward opens a stream to dst for local and splices them. If the
// sidecar refuses, local is reset at once and the reason is logged.
func (c *Client) forward(ctx context.Context, local localConn, dst string) error {
	ws, err := c.dial(ctx, PathTCP, url.Values{"dst": {dst}})
	if err != nil {
		c.logRefused("tcp", dst, err)
		resetLocal(local)
		return err
	}
	splice(ctx, ws, local, c.ka)
	return nil
}

// logRefused says why the sidecar did not open a flow.
func (c *Client) logRefused(network, dst string, err error) {
	var refused *RefusedError
	if errors.As(err, &refused) {
		c.log.Warn("tunnel: the sidecar refused the connection", "network", network, "dst", dst, "status", refused.Status, "reason", refused.Reason)
		return
	}
	c.log.Warn("tunnel: cannot open a tunnel connection", "network", network, "dst", dst, "err", err)
}
