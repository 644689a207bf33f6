package wsproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// TLSOptions configures verification of the server (and of an https proxy).
type TLSOptions struct {
	// CAFile is a PEM bundle trusted in addition to the system roots, for
	// sites whose proxy re-signs TLS.
	CAFile string
	// Insecure skips certificate verification. It is logged at warning
	// level on every connection setup.
	Insecure bool
}

// ProxyFunc picks the proxy for a target URL (http/https scheme); nil means
// direct. [ProxyFromEnvironment] is the default.
type ProxyFunc func(target *url.URL) (*url.URL, error)

// ProxyFromEnvironment reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY (and the
// lower-case forms) at the time of the call.
func ProxyFromEnvironment() ProxyFunc {
	return httpproxy.FromEnvironment().ProxyFunc()
}

func tlsConfig(opts TLSOptions, log *slog.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("wsproxy: read CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("wsproxy: CA file %s holds no PEM certificate", opts.CAFile)
		}
		cfg.RootCAs = pool
	}
	if opts.Insecure {
		log.Warn("TLS certificate verification is OFF (--insecure): anyone on the path can impersonate the sidecar and read the credential")
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}

// HTTPOptions configure NewHTTPClient.
type HTTPOptions struct {
	TLS   TLSOptions
	Proxy ProxyFunc // nil reads the environment
	// DialContext opens TCP connections; nil uses a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger      *slog.Logger // nil discards
}

// NewHTTPClient returns an HTTP/1.1 client for websocket upgrades to the
// server of target (ws:// or wss://), through the proxy the options or
// the environment choose, with the TLS options applied. The tunnel mode
// uses it so that it reaches the sidecar exactly as the mesh client does.
func NewHTTPClient(target *url.URL, opts HTTPOptions) (*http.Client, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tlsCfg, err := tlsConfig(opts.TLS, log)
	if err != nil {
		return nil, err
	}
	return newHTTPClient(target, opts.Proxy, tlsCfg, opts.DialContext)
}

// newHTTPClient builds the client for the websocket upgrade of target. The
// proxy is chosen once for target; a proxy is always used with CONNECT,
// also for ws://, because forward proxies rarely pass an Upgrade through.
func newHTTPClient(target *url.URL, proxy ProxyFunc, tlsCfg *tls.Config, dial dialFunc) (*http.Client, error) {
	if proxy == nil {
		proxy = ProxyFromEnvironment()
	}
	purl, err := proxy(httpURL(target))
	if err != nil {
		return nil, fmt.Errorf("wsproxy: choose proxy: %w", err)
	}
	if dial == nil {
		nd := &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 15 * time.Second}
		dial = nd.DialContext
	}
	d := &connectDialer{proxy: purl, tls: tlsCfg, dial: dial}
	tr := &http.Transport{
		DialContext:         corkDialer(d.DialContext),
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 15 * time.Second,
		ForceAttemptHTTP2:   false,
		// A non-nil empty map keeps HTTP/2 off: the upgrade needs HTTP/1.1.
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr}, nil
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ProxyError is an HTTP proxy's refusal of a CONNECT.
type ProxyError struct {
	Proxy  string // the proxy URL, password redacted
	Target string
	Status int
	Text   string
}

func (e *ProxyError) Error() string {
	return fmt.Sprintf("wsproxy: proxy %s refused CONNECT %s: %s", e.Proxy, e.Target, e.Text)
}

// AuthRequired reports a refusal of the proxy credentials (407, or 401 from
// proxies that answer so): retrying will not help.
func (e *ProxyError) AuthRequired() bool {
	return e.Status == http.StatusProxyAuthRequired || e.Status == http.StatusUnauthorized
}

// connectDialer dials directly or through an HTTP(S) proxy with CONNECT.
type connectDialer struct {
	proxy *url.URL // nil: direct
	tls   *tls.Config
	dial  dialFunc
}

func (d *connectDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.proxy == nil {
		return d.dial(ctx, network, addr)
	}
	c, err := d.dialProxy(ctx, network)
	if err != nil {
		return nil, err
	}
	if err := d.connect(ctx, c, addr); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (d *connectDialer) dialProxy(ctx context.Context, network string) (net.Conn, error) {
	host := d.proxy.Host
	if d.proxy.Port() == "" {
		port := "80"
		if d.proxy.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(d.proxy.Hostname(), port)
	}
	c, err := d.dial(ctx, network, host)
	if err != nil {
		return nil, fmt.Errorf("wsproxy: dial proxy %s: %w", d.proxy.Redacted(), err)
	}
	switch d.proxy.Scheme {
	case "http":
		return c, nil
	case "https":
		cfg := d.tls.Clone()
		cfg.ServerName = d.proxy.Hostname()
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("wsproxy: TLS to proxy %s: %w", d.proxy.Redacted(), err)
		}
		return tc, nil
	default:
		c.Close()
		return nil, fmt.Errorf("wsproxy: proxy %s: scheme %q not supported (use http:// or https://)", d.proxy.Redacted(), d.proxy.Scheme)
	}
}

// connect asks the proxy for a tunnel to addr, bounded by ctx.
func (d *connectDialer) connect(ctx context.Context, c net.Conn, addr string) error {
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: addr},
		Host:   addr,
		Header: make(http.Header),
	}
	if u := d.proxy.User; u != nil {
		pw, _ := u.Password()
		cred := base64.StdEncoding.EncodeToString([]byte(u.Username() + ":" + pw))
		req.Header.Set("Proxy-Authorization", "Basic "+cred)
	}
	if err := req.Write(c); err != nil {
		return fmt.Errorf("wsproxy: CONNECT %s via %s: %w", addr, d.proxy.Redacted(), err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fmt.Errorf("wsproxy: CONNECT %s via %s: %w", addr, d.proxy.Redacted(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &ProxyError{Proxy: d.proxy.Redacted(), Target: addr, Status: resp.StatusCode, Text: resp.Status}
	}
	if br.Buffered() > 0 {
		return fmt.Errorf("wsproxy: proxy %s sent data before the tunnel was used", d.proxy.Redacted())
	}
	if ctx.Err() != nil {
		return fmt.Errorf("wsproxy: CONNECT %s: %w", addr, ctx.Err())
	}
	return c.SetDeadline(time.Time{})
}
