package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// Resolver looks up a destination name; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc dials a resolved destination ("tcp" or "udp", "ip:port").
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// ServerConfig configures a [Server]. Zero values take the documented
// defaults.
type ServerConfig struct {
	// Auth authenticates every request before anything else; required.
	Auth wsproxy.Authenticator
	// Dial opens connections to destinations; required. It is called with
	// resolved addresses only and must apply the egress policy at dial
	// time, refusing with an error that wraps *policy.Denial (mapped to
	// 403 with the denial's reason; other errors are 502, timeouts 504).
	// TCP connections must implement CloseWrite (*net.TCPConn does).
	Dial DialFunc
	// Resolver resolves destination names; nil is net.DefaultResolver (in
	// a pod, /etc/resolv.conf gives cluster names).
	Resolver Resolver
	// ReversePorts are the pod ports clients may listen on with -R (the
	// sidecar's --expose list). Empty: -R is refused.
	ReversePorts []Port
	// ReverseHost is the address reverse listeners bind; "" is every
	// address of the pod.
	ReverseHost string
	// Claim, if set, is called before a reverse port is bound: the owner
	// of the port (the sidecar's mesh ingress on an --expose port) frees
	// it and gets it back through release when the registration ends. A
	// registration that replaces another inherits its claim.
	Claim func(p Port) (release func(), err error)
	// DialTimeout bounds name resolution plus the dial (default 10s).
	DialTimeout time.Duration
	// UDPIdle ends a UDP session without datagrams (default 60s).
	UDPIdle time.Duration
	// MaxConns caps concurrent tunnel websockets (default 4096); more are
	// refused with 503. It also caps reverse connections waiting to be
	// claimed; more are reset.
	MaxConns int
	// Keepalive configures pings on every websocket (default every 20s).
	Keepalive wsproxy.Keepalive
	// Logger receives events; nil discards them. Credentials are never logged.
	Logger *slog.Logger
}

const (
	defaultDialTimeout = 10 * time.Second
	defaultUDPIdle     = 60 * time.Second
	defaultMaxConns    = 4096
)

// Server is the sidecar's end of the tunnel mode, an http.Handler for
// every path under [PathPrefix]. It owns each websocket it accepts (served
// on the handler goroutine and goroutines it waits for) and every reverse
// listener; Shutdown closes them all.
type Server struct {
	cfg   ServerConfig
	log   *slog.Logger
	ka    keepalive
	ctx   context.Context // alive until Shutdown
	stop  context.CancelFunc
	slots chan struct{} // one per live websocket

	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup // one per live handler
	pending map[string]*pendingConn
	reverse map[Port]*reverseReg
	// noReverse refuses new -R registrations (StopReverse).
	noReverse bool
	regMu     sync.Mutex // serializes reverse registrations
	counters  counters
}

var _ http.Handler = (*Server)(nil)

// NewServer validates cfg.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Auth == nil {
		return nil, errors.New("tunnel: new server: no authenticator")
	}
	if cfg.Dial == nil {
		return nil, errors.New("tunnel: new server: no dial function")
	}
	if err := checkPorts(cfg.ReversePorts); err != nil {
		return nil, fmt.Errorf("tunnel: new server: %w", err)
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	cfg.DialTimeout = orDefault(cfg.DialTimeout, defaultDialTimeout)
	cfg.UDPIdle = orDefault(cfg.UDPIdle, defaultUDPIdle)
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = defaultMaxConns
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, log: log, ka: newKeepalive(cfg.Keepalive),
		ctx: ctx, stop: stop,
		slots:   make(chan struct{}, cfg.MaxConns),
		pending: map[string]*pendingConn{},
		reverse: map[Port]*reverseReg{},
	}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func checkPorts(ports []Port) error {
	for _, p := range ports {
		if p.Num == 0 || (p.Proto != "tcp" && p.Proto != "udp") {
			return fmt.Errorf("reverse port %v: want 1-65535 and tcp or udp", p)
		}
	}
	return nil
}

// ServeHTTP authenticates and dispatches on the path suffix: the caller
// mounts the Server at prefix+PathPrefix and need not strip the prefix.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.cfg.Auth.Authenticate(r); !ok {
		s.counters.authFailures.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="meshlaunch"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	h := s.route(r)
	if h == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !s.track() {
		http.Error(w, "sidecar shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	h(w, r)
}

func (s *Server) route(r *http.Request) http.HandlerFunc {
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, PathHello):
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
	case strings.HasSuffix(p, PathTCP):
		return s.serveTCP
	case strings.HasSuffix(p, PathUDP):
		return s.serveUDP
	case strings.HasSuffix(p, PathReverse):
		return s.serveReverse
	case strings.HasSuffix(p, PathAccept):
		return s.serveAccept
	}
	return nil
}

// track counts a handler in, unless the server is shutting down.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.wg.Add(1)
	return true
}

// upgrade takes a websocket slot and accepts the upgrade; on failure it
// has answered the request. release must be called when ws is done.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) (ws *wsConn, release func(), ok bool) {
	release, ok = s.reserve(w, r)
	if !ok {
		return nil, nil, false
	}
	if ws, ok = s.accept(w, r, release); !ok {
		return nil, nil, false
	}
	return ws, release, true
}

// reserve checks the subprotocol and takes a websocket slot before any
// work is done for the request (a dial, for forward streams), so that
// MaxConns bounds dials in progress too; on failure it has answered.
func (s *Server) reserve(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	if !wsproxy.OffersSubprotocol(r, Subprotocol) {
		http.Error(w, "websocket upgrade with subprotocol "+Subprotocol+" required", http.StatusBadRequest)
		return nil, false
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.counters.rejected.Add(1)
		http.Error(w, "too many tunnel connections", http.StatusServiceUnavailable)
		return nil, false
	}
	return func() { <-s.slots }, true
}

// accept upgrades a request that holds a slot; on failure it releases
// the slot.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, release func()) (*wsConn, bool) {
	ws, cork, err := wsproxy.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:    []string{Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		release()
		s.log.Debug("tunnel: websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
		return nil, false
	}
	return &wsConn{Conn: ws, cork: cork}, true
}

// StopReverse ends every -R registration (its control websocket closes
// with 1001, its pod listener closes) and refuses new ones; forward
// streams go on. A draining sidecar calls it so that the pod stops
// accepting on reverse ports while established streams finish.
func (s *Server) StopReverse() {
	s.mu.Lock()
	s.noReverse = true
	regs := make([]*reverseReg, 0, len(s.reverse))
	for _, r := range s.reverse {
		regs = append(regs, r)
	}
	s.mu.Unlock()
	for _, r := range regs {
		r.cancel(context.Canceled)
		r.closeListener()
	}
}

// Shutdown refuses new requests, closes every websocket (1001), stops the
// reverse listeners, resets pending reverse connections and waits for the
// handlers until ctx ends. It is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	pending := s.pending
	s.pending = map[string]*pendingConn{}
	s.mu.Unlock()
	s.stop()
	for _, p := range pending {
		p.drop()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tunnel: shutdown: %w", ctx.Err())
	}
}
