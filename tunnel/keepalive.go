package tunnel

import (
	"context"
	"fmt"
	"time"

	"github.com/coder/websocket"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// keepalive is wsproxy.Keepalive with its defaults filled in.
type keepalive struct {
	interval, timeout, write time.Duration
}

func newKeepalive(k wsproxy.Keepalive) keepalive {
	ka := keepalive{interval: k.Interval, timeout: k.Timeout, write: k.WriteTimeout}
	if ka.interval <= 0 {
		ka.interval = 20 * time.Second // below nginx's 60 s idle timeout
	}
	if ka.timeout <= 0 {
		ka.timeout = 15 * time.Second
	}
	if ka.write <= 0 {
		ka.write = 10 * time.Second
	}
	return ka
}

// pingLoop pings ws every interval until ctx ends. It returns the first
// missed pong that counts: while exempt reports true (a write of ours is
// blocked on the peer's or the local side's backpressure, so nobody reads
// the pong) a miss is forgiven and the TCP stack's own timeouts apply.
// Someone must be reading ws for pongs to arrive.
func pingLoop(ctx context.Context, ws *wsConn, ka keepalive, exempt func() bool) error {
	t := time.NewTicker(ka.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, ka.timeout)
		err := ws.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil && (exempt == nil || !exempt()) {
			return fmt.Errorf("tunnel: keepalive: no pong within %v: %w", ka.timeout, err)
		}
	}
}

// writeMessage writes one message bounded by the write timeout.
func writeMessage(ctx context.Context, ws *wsConn, ka keepalive, typ websocket.MessageType, p []byte) error {
	wctx, cancel := context.WithTimeout(ctx, ka.write)
	defer cancel()
	return ws.Write(wctx, typ, p)
}
