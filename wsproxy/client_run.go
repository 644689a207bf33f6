package wsproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// run keeps a websocket up until ctx ends.
func (c *Client) run(ctx context.Context) {
	bo := c.cfg.Backoff.Retry()
	for ctx.Err() == nil {
		l, err := c.dial(ctx)
		if err != nil {
			c.dialFailed(ctx, err)
			if !bo.Wait(ctx) {
				return
			}
			continue
		}
		started := time.Now()
		c.linkUp(l)
		err = l.serve(c.in, func() rxPacket { return rxPacket{ep: c.ep} })
		c.linkDown(l)
		lived := time.Since(started)
		bo.Connected(lived)
		if ctx.Err() != nil {
			return
		}
		delay := bo.Next()
		c.log.Warn("websocket lost; reconnecting", "after", lived.Round(time.Millisecond), "in", delay.Round(time.Millisecond), "err", err)
		if !sleep(ctx, delay) {
			return
		}
	}
}

func (c *Client) dial(ctx context.Context) (*link, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h := c.cfg.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", "Bearer "+c.cfg.Credential)
	ws, cork, resp, err := Dial(dctx, c.cfg.URL.String(), &websocket.DialOptions{
		HTTPClient:      c.http,
		HTTPHeader:      h,
		Subprotocols:    []string{Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, ErrUnauthorized
		}
		return nil, fmt.Errorf("wsproxy: dial %s: %w", c.cfg.URL.Redacted(), err)
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol required")
		return nil, fmt.Errorf("wsproxy: dial %s: server did not accept subprotocol %s", c.cfg.URL.Redacted(), Subprotocol)
	}
	return newLink(ctx, ws, cork, c.cfg.Keepalive, ReadLimit(c.cfg.MTU)), nil
}

func (c *Client) dialFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	n := c.dialFails.Add(1)
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
	// Repeated identical failures are logged at debug level: the backoff
	// already spaces them, and the first one said what is wrong.
	level := c.log.Warn
	if n > 1 && errors.Is(err, ErrUnauthorized) {
		level = c.log.Debug
	}
	level("websocket dial failed", "attempt", n, "err", err)
}

func (c *Client) linkUp(l *link) {
	c.cur.Store(l)
	n := c.connects.Add(1)
	if n == 1 {
		c.log.Debug("websocket connected")
	} else {
		c.log.Info("websocket reconnected", "connects", n)
	}
	c.mu.Lock()
	close(c.up)
	c.lastErr = nil
	c.mu.Unlock()
	if c.cfg.OnConnect != nil {
		c.cfg.OnConnect()
	}
}

func (c *Client) linkDown(l *link) {
	c.cur.CompareAndSwap(l, nil)
	c.bytesInDone.Add(l.bytesIn.Load())
	c.bytesOutDone.Add(l.bytesOut.Load())
	c.mu.Lock()
	c.up = make(chan struct{})
	c.mu.Unlock()
}
