package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ErrPortTaken ends a -R forward whose pod port another client registered.
var ErrPortTaken = errors.New("tunnel: another client registered the same pod port")

// runReverse keeps f registered: it reconnects its control websocket with
// jittered backoff until ctx ends. Streams it accepted join wg and outlive
// a reconnect. It returns an error only for refusals that retrying cannot
// fix.
func (c *Client) runReverse(ctx context.Context, f Forward, wg *sync.WaitGroup) error {
	bo := c.cfg.Backoff.Retry()
	q := url.Values{"port": {strconv.Itoa(int(f.RemotePort))}, "proto": {f.Proto}}
	for ctx.Err() == nil {
		ws, err := c.dial(ctx, PathReverse, q)
		if err != nil {
			if permanent(err) {
				return fmt.Errorf("tunnel: -R %v: %w", f, err)
			}
			if ctx.Err() == nil {
				c.log.Warn("tunnel: cannot register reverse port; retrying", "port", f.RemotePort, "proto", f.Proto, "err", err)
			}
			bo.Wait(ctx)
			continue
		}
		c.log.Info("tunnel: reverse port registered", "pod_port", f.RemotePort, "proto", f.Proto, "to", f.dst())
		start := time.Now()
		err = c.serveControl(ctx, f, ws, wg)
		if ctx.Err() != nil {
			return nil
		}
		if websocket.CloseStatus(err) == StatusReplaced {
			return fmt.Errorf("tunnel: -R %v: %w", f, ErrPortTaken)
		}
		bo.Connected(time.Since(start))
		c.log.Warn("tunnel: reverse control connection lost; reconnecting", "port", f.RemotePort, "err", err)
		bo.Wait(ctx)
	}
	return nil
}

// permanent reports refusals that a retry cannot fix: the credential, a
// port the sidecar does not expose, a bad request or a missing endpoint.
func permanent(err error) bool {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Status == http.StatusForbidden || r.Status == http.StatusBadRequest || r.Status == http.StatusNotFound
	}
	return errors.Is(err, ErrUnauthorized)
}

// serveControl serves one control websocket until it fails or ctx ends,
// and returns why it ended.
func (c *Client) serveControl(ctx context.Context, f Forward, ws *wsConn, wg *sync.WaitGroup) error {
	runCtx := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var own sync.WaitGroup
	own.Go(func() { cancel(pingLoop(ctx, ws, c.ka, nil)) })
	if f.Proto == "udp" {
		ru := newReverseUDP(c, f, ws)
		defer ru.close()
		own.Go(func() { cancel(ru.readLoop(ctx)) })
		own.Go(func() { ru.expireLoop(ctx) })
	} else {
		own.Go(func() { cancel(c.readControl(runCtx, f, ws, wg)) })
	}
	<-ctx.Done()
	if runCtx.Err() != nil {
		_ = ws.Close(websocket.StatusGoingAway, "client shutting down")
	} else {
		_ = ws.CloseNow()
	}
	own.Wait()
	return context.Cause(ctx)
}

// readControl starts a stream for every connection the sidecar announces.
func (c *Client) readControl(ctx context.Context, f Forward, ws *wsConn, wg *sync.WaitGroup) error {
	for {
		typ, msg, err := ws.Read(context.Background()) // ends when ws is closed
		if err != nil {
			return err
		}
		var m controlMsg
		if typ != websocket.MessageText || json.Unmarshal(msg, &m) != nil || m.ID == "" {
			c.log.Warn("tunnel: ignoring a malformed control message", "port", f.RemotePort)
			continue
		}
		wg.Go(func() { c.acceptReverse(ctx, f, m) })
	}
}

// localDialTimeout bounds the dial of a -R forward's local service.
const localDialTimeout = 10 * time.Second

// acceptReverse dials the local service, then claims the pod connection.
// If the local service does not answer the pod client is reset at once.
func (c *Client) acceptReverse(ctx context.Context, f Forward, m controlMsg) {
	d := net.Dialer{Timeout: localDialTimeout}
	local, err := d.DialContext(ctx, "tcp", f.dst())
	q := url.Values{"id": {m.ID}}
	if err != nil {
		c.log.Warn("tunnel: reverse connection: local service unreachable", "dst", f.dst(), "client", m.Client, "err", err)
		q.Set("error", err.Error())
		c.notifyRefused(ctx, q)
		return
	}
	if f.ProxyProtocol {
		if _, err := io.WriteString(local, proxyHeader(m.Client, m.Server)); err != nil {
			resetLocal(local)
			q.Set("error", err.Error())
			c.notifyRefused(ctx, q)
			return
		}
	}
	ws, err := c.dial(ctx, PathAccept, q)
	if err != nil {
		c.logRefused("tcp", f.dst(), err)
		resetLocal(local)
		return
	}
	splice(ctx, ws, local.(*net.TCPConn), c.ka)
}

// notifyRefused tells the sidecar to reset a pending pod connection.
func (c *Client) notifyRefused(ctx context.Context, q url.Values) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.get(ctx, PathAccept, q); err != nil {
		c.log.Debug("tunnel: reverse refusal not delivered", "err", err)
	}
}

// get sends a plain GET on path with the credential and expects 204.
func (c *Client) get(ctx context.Context, path string, q url.Values) error {
	u := httpURLFor(c.cfg.URL, path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("tunnel: get %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Credential)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("tunnel: get %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	return dialError(resp, nil)
}

func httpURLFor(base *url.URL, path string) *url.URL {
	u := *base
	u.Path = strings.TrimRight(base.Path, "/") + path
	u.RawPath = ""
	u.Scheme = strings.Replace(u.Scheme, "ws", "http", 1)
	return &u
}
