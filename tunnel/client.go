package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// ErrUnauthorized means the sidecar refused the credential (HTTP 401).
var ErrUnauthorized = errors.New("tunnel: the sidecar refused the credential (401): the secret differs from the sidecar's")

// RefusedError is the sidecar's answer when it refuses a request before
// the upgrade: the destination is denied by its policy (403), unreachable
// (502) or timed out (504), or a -R port is not exposed (403).
type RefusedError struct {
	Status int    // HTTP status
	Reason string // the sidecar's one-line reason
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("tunnel: the sidecar refused (%d %s): %s", e.Status, http.StatusText(e.Status), e.Reason)
}

// ClientConfig configures a [Client].
type ClientConfig struct {
	// URL is the sidecar's server URL (ws:// or wss://, optional path
	// prefix), as checked by wsproxy.ParseServerURL; required.
	URL *url.URL
	// Credential is the bearer credential; required, never logged.
	Credential string
	// HTTP selects the proxy, TLS options and dialer, as for the mesh.
	HTTP wsproxy.HTTPOptions
	// Keepalive configures pings on every websocket (default every 20s).
	Keepalive wsproxy.Keepalive
	// Backoff spaces reconnects of -R control websockets.
	Backoff wsproxy.Backoff
	// UDPIdle ends local UDP sessions without datagrams (default 60s).
	UDPIdle time.Duration
	// Logger receives events; nil discards them.
	Logger *slog.Logger
}

// Client is the remote node's end of the tunnel mode. It is safe for
// concurrent use; Run and Stdio own every goroutine and socket they open.
type Client struct {
	cfg  ClientConfig
	log  *slog.Logger
	ka   keepalive
	http *http.Client
}

// NewClient validates cfg and builds the HTTP client (proxy, TLS).
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.URL == nil {
		return nil, errors.New("tunnel: new client: no server URL")
	}
	if cfg.Credential == "" {
		return nil, errors.New("tunnel: new client: no credential")
	}
	cfg.UDPIdle = orDefault(cfg.UDPIdle, defaultUDPIdle)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.HTTP.Logger = cmpOrLogger(cfg.HTTP.Logger, log)
	hc, err := wsproxy.NewHTTPClient(cfg.URL, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("tunnel: new client: %w", err)
	}
	return &Client{cfg: cfg, log: log, ka: newKeepalive(cfg.Keepalive), http: hc}, nil
}

func cmpOrLogger(a, b *slog.Logger) *slog.Logger {
	if a != nil {
		return a
	}
	return b
}

// dial opens a tunnel websocket on path with query q. Refusals before the
// upgrade come back as ErrUnauthorized or *RefusedError.
func (c *Client) dial(ctx context.Context, path string, q url.Values) (*wsConn, error) {
	u := wsproxy.JoinPath(c.cfg.URL, path)
	u.RawQuery = q.Encode()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, cork, resp, err := wsproxy.Dial(dctx, u.String(), &websocket.DialOptions{
		HTTPClient:      c.http,
		HTTPHeader:      http.Header{"Authorization": {"Bearer " + c.cfg.Credential}},
		Subprotocols:    []string{Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return nil, dialError(resp, err)
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol required")
		return nil, fmt.Errorf("tunnel: dial %s: the server does not speak %s (not a meshlaunch sidecar, or too old)", path, Subprotocol)
	}
	return &wsConn{Conn: ws, cork: cork}, nil
}

func dialError(resp *http.Response, err error) error {
	if resp == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return fmt.Errorf("tunnel: dial sidecar: %w", err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return ErrUnauthorized
	}
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 1024))
	}
	reason := strings.TrimSpace(string(body))
	if reason == "" {
		reason = http.StatusText(resp.StatusCode)
	}
	return &RefusedError{Status: resp.StatusCode, Reason: reason}
}

// Check asks the sidecar whether it accepts the credential. It returns
// ErrUnauthorized, a *RefusedError (e.g. 404: a sidecar without tunnel
// support) or a connection error.
func (c *Client) Check(ctx context.Context) error {
	return c.get(ctx, PathHello, nil)
}
