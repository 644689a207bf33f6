package tunnel

import (
	"context"

	"github.com/coder/websocket"

	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// wsConn is a tunnel websocket whose every message reaches the socket in
// one write (wsproxy.Corker): a 64 KiB stream message would otherwise
// leave a client as sixteen 4 KiB writes.
type wsConn struct {
	*websocket.Conn
	cork wsproxy.Corker
}

// Write sends p as one message of type typ, corked.
func (c *wsConn) Write(ctx context.Context, typ websocket.MessageType, p []byte) error {
	return wsproxy.WriteCorked(ctx, c.Conn, c.cork, typ, p)
}
