package wsproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"golang.zx2c4.com/wireguard/conn"
)

// ClientConfig configures a [Client].
type ClientConfig struct {
	// URL is the full websocket URL of the sidecar's mesh endpoint.
	URL *url.URL
	// Credential is sent as "Authorization: Bearer" on the upgrade.
	Credential string
	// Header holds extra request headers for the upgrade (e.g. the
	// peer's public key when a sidecar serves several peers).
	Header http.Header
	// MTU is the inner MTU of the WireGuard device; it sizes the read limit.
	MTU int
	// TLS configures server (and https proxy) verification.
	TLS TLSOptions
	// Proxy chooses an HTTP proxy; nil reads the environment.
	Proxy ProxyFunc
	// DialContext opens the TCP connection to the server or the proxy;
	// nil uses a net.Dialer. Tests use it to dial from another network
	// namespace.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Keepalive configures pings and write deadlines.
	Keepalive Keepalive
	// Backoff configures reconnect delays.
	Backoff Backoff
	// OnConnect, if set, runs after every successful (re)connect, on the
	// client's own goroutine, before any datagram is read. The device uses
	// it to send a handshake at once. It must not call Close.
	OnConnect func()
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

// ClientStats are counters of a Client.
type ClientStats struct {
	Connected         bool
	Connects          uint64 // successful upgrades, including the first
	DialFailures      uint64
	BytesIn, BytesOut uint64 // websocket payload bytes of closed and current links
}

// Client is a conn.Bind that carries datagrams over one websocket to a
// sidecar, reconnecting as needed. It is safe for concurrent use.
//
// Between Open and Close a goroutine owned by the Client keeps the websocket
// up. Send fails with ErrNotConnected while there is none; WireGuard
// retransmits its handshakes and the inner TCP retransmits its segments.
type Client struct {
	cfg  ClientConfig
	log  *slog.Logger
	http *http.Client
	ep   *serverEndpoint
	in   *inbox

	mu      sync.Mutex
	cancel  context.CancelFunc // nil while closed
	wg      sync.WaitGroup
	up      chan struct{} // closed while a link is up; replaced when it goes down
	lastErr error

	cur                       atomic.Pointer[link]
	connects, dialFails       atomic.Uint64
	bytesInDone, bytesOutDone atomic.Uint64
}

var _ conn.Bind = (*Client)(nil)

// NewClient validates cfg and prepares a Client; nothing is dialed before
// the device opens the Bind.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.URL == nil {
		return nil, errors.New("wsproxy: client: no server URL")
	}
	if _, err := ParseServerURL(cfg.URL.String()); err != nil {
		return nil, err
	}
	if cfg.Credential == "" {
		return nil, errors.New("wsproxy: client: empty credential")
	}
	if cfg.MTU <= 0 {
		return nil, fmt.Errorf("wsproxy: client: MTU %d must be positive", cfg.MTU)
	}
	cfg.Keepalive = cfg.Keepalive.withDefaults()
	cfg.Backoff = cfg.Backoff.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc, err := NewHTTPClient(cfg.URL, HTTPOptions{TLS: cfg.TLS, Proxy: cfg.Proxy, DialContext: cfg.DialContext, Logger: log})
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg:  cfg,
		log:  log.With("server", cfg.URL.Redacted()),
		http: hc,
		ep:   &serverEndpoint{url: cfg.URL.String()},
		in:   newInbox(ReadLimit(cfg.MTU)),
		up:   make(chan struct{}),
	}, nil
}

// Open starts connecting and returns the receive function.
func (c *Client) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	recv, err := c.in.start()
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background()) // alive until Close
	c.cancel = cancel
	c.wg.Go(func() { c.run(ctx) })
	return []conn.ReceiveFunc{recv}, port, nil
}

// Close drops the websocket, stops reconnecting and waits for the
// Client's goroutines. The receive function returns net.ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	cancel := c.cancel
	c.cancel = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		c.wg.Wait()
	}
	c.in.stop()
	return nil
}

// Send writes each datagram as one message on the current websocket.
func (c *Client) Send(bufs [][]byte, _ conn.Endpoint) error {
	l := c.cur.Load()
	if l == nil {
		return ErrNotConnected
	}
	for _, b := range bufs {
		if err := l.write(b); err != nil {
			return err
		}
	}
	return nil
}

// ParseEndpoint accepts only the configured server URL: the client has one peer.
func (c *Client) ParseEndpoint(s string) (conn.Endpoint, error) {
	if s != c.ep.url {
		return nil, fmt.Errorf("wsproxy: endpoint %q is not the server URL %q", s, c.ep.url)
	}
	return c.ep, nil
}

// Endpoint is the client's only endpoint, to configure on the device's peer.
func (c *Client) Endpoint() string { return c.ep.url }

func (c *Client) SetMark(uint32) error { return nil }
func (c *Client) BatchSize() int       { return batchSize }

// WaitConnected blocks until a websocket is up or ctx ends; then it
// returns ctx's error joined with the last dial error, which says why.
func (c *Client) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	up := c.up
	c.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		last := c.lastErr
		c.mu.Unlock()
		return errors.Join(fmt.Errorf("wsproxy: waiting for the websocket: %w", ctx.Err()), last)
	}
}

// LastError is why the last dial failed, nil after a successful one.
func (c *Client) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Stats returns the Client's counters.
func (c *Client) Stats() ClientStats {
	s := ClientStats{
		Connects:     c.connects.Load(),
		DialFailures: c.dialFails.Load(),
		BytesIn:      c.bytesInDone.Load(),
		BytesOut:     c.bytesOutDone.Load(),
	}
	if l := c.cur.Load(); l != nil {
		s.Connected = true
		s.BytesIn += l.bytesIn.Load()
		s.BytesOut += l.bytesOut.Load()
	}
	return s
}
