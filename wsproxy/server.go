package wsproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"golang.zx2c4.com/wireguard/conn"
)

// unauthorizedBody is the same for every refusal: it tells a prober nothing.
const unauthorizedBody = "unauthorized\n"

// ServerConfig configures a [Server].
type ServerConfig struct {
	// Auth authenticates upgrades; required.
	Auth Authenticator
	// MTU is the inner MTU of the WireGuard device; it sizes the read limit.
	MTU int
	// Keepalive configures pings and write deadlines per session.
	Keepalive Keepalive
	// QueueLen bounds each session's send queue (datagrams); default 512.
	// A full queue drops: WireGuard and the inner TCP recover, and one slow
	// peer cannot block the device.
	QueueLen int
	// Logger receives session events; nil discards them.
	Logger *slog.Logger
}

// ServerStats are counters of a Server.
type ServerStats struct {
	Sessions                  int // live sessions (gauge)
	Accepted, Replaced        uint64
	AuthFailures, BadRequests uint64
	QueueDrops                uint64
	BytesIn, BytesOut         uint64 // closed sessions only plus live ones
}

// Server is the sidecar end: an http.Handler for the mesh endpoint and the
// conn.Bind of the sidecar's WireGuard device. Sessions are owned by the
// Server (the handler goroutine of each and the goroutines it starts);
// Shutdown closes them. Bind Close/Open only gate the receive function.
type Server struct {
	cfg   ServerConfig
	log   *slog.Logger
	in    *inbox
	limit int

	mu       sync.Mutex
	sessions map[uint64]*session
	byPeer   map[string]*session
	nextID   uint64
	closing  bool
	wg       sync.WaitGroup // one per live handler

	accepted, replaced, authFails, badReqs, drops atomic.Uint64
	bytesInDone, bytesOutDone                     atomic.Uint64
}

var (
	_ conn.Bind    = (*Server)(nil)
	_ http.Handler = (*Server)(nil)
)

// NewServer validates cfg.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Auth == nil {
		return nil, errors.New("wsproxy: server: no authenticator")
	}
	if cfg.MTU <= 0 {
		return nil, fmt.Errorf("wsproxy: server: MTU %d must be positive", cfg.MTU)
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 512
	}
	cfg.Keepalive = cfg.Keepalive.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limit := ReadLimit(cfg.MTU)
	return &Server{
		cfg:      cfg,
		log:      log,
		in:       newInbox(limit),
		limit:    limit,
		sessions: map[uint64]*session{},
		byPeer:   map[string]*session{},
	}, nil
}

// ServeHTTP authenticates, upgrades and serves one session until it ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	peer, ok := s.cfg.Auth.Authenticate(r)
	if !ok {
		s.authFails.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="meshlaunch"`)
		http.Error(w, strings.TrimSuffix(unauthorizedBody, "\n"), http.StatusUnauthorized)
		return
	}
	if !OffersSubprotocol(r, Subprotocol) {
		s.badReqs.Add(1)
		http.Error(w, "websocket upgrade with subprotocol "+Subprotocol+" required", http.StatusBadRequest)
		return
	}
	if !s.track() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	ws, cork, err := Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:    []string{Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		s.badReqs.Add(1)
		s.log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	s.serveSession(r.Context(), peer, r.RemoteAddr, ws, cork)
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

func (s *Server) serveSession(ctx context.Context, peer, remote string, ws *websocket.Conn, cork Corker) {
	sess := s.register(ctx, peer, ws, cork)
	log := s.log.With("peer", peer, "session", sess.ep.id, "remote", remote)
	log.Info("session opened")
	err := sess.serve(s.in)
	s.unregister(sess)
	log.Info("session closed", "err", err)
}

// register adds a session; a live session of the same peer is replaced.
func (s *Server) register(ctx context.Context, peer string, ws *websocket.Conn, cork Corker) *session {
	s.mu.Lock()
	s.nextID++
	sess := newSession(ctx, &sessionEndpoint{id: s.nextID, peer: peer}, ws, cork, s.cfg, s.limit, &s.drops)
	old := s.byPeer[peer]
	if old != nil {
		delete(s.sessions, old.ep.id) // no more datagrams for it
	}
	s.sessions[sess.ep.id] = sess
	s.byPeer[peer] = sess
	s.mu.Unlock()
	s.accepted.Add(1)
	if old != nil {
		s.replaced.Add(1)
		// Asynchronously: the close handshake must not delay the new session.
		s.wg.Go(func() {
			old.link.closeWith(websocket.StatusPolicyViolation, "replaced by a newer session of the same peer")
		})
	}
	return sess
}

func (s *Server) unregister(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess.ep.id)
	if s.byPeer[sess.ep.peer] == sess {
		delete(s.byPeer, sess.ep.peer)
	}
	s.mu.Unlock()
	s.bytesInDone.Add(sess.link.bytesIn.Load())
	s.bytesOutDone.Add(sess.link.bytesOut.Load())
}

// Shutdown refuses new sessions, closes every session with 1001 (going
// away) so clients reconnect, and waits for their goroutines or ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	live := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		live = append(live, sess)
	}
	s.mu.Unlock()
	for _, sess := range live {
		// In parallel: each close handshake may wait on a dead peer.
		s.wg.Go(func() { sess.link.closeWith(websocket.StatusGoingAway, "sidecar shutting down") })
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, sess := range live {
			sess.link.fail(ctx.Err())
		}
		<-done
		return fmt.Errorf("wsproxy: shutdown: %w", ctx.Err())
	}
}

// Peers lists the peers with a live session.
func (s *Server) Peers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.byPeer))
	for p := range s.byPeer {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Stats returns the Server's counters.
func (s *Server) Stats() ServerStats {
	st := ServerStats{
		Accepted:     s.accepted.Load(),
		Replaced:     s.replaced.Load(),
		AuthFailures: s.authFails.Load(),
		BadRequests:  s.badReqs.Load(),
		QueueDrops:   s.drops.Load(),
		BytesIn:      s.bytesInDone.Load(),
		BytesOut:     s.bytesOutDone.Load(),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Sessions = len(s.sessions)
	for _, sess := range s.sessions {
		st.BytesIn += sess.link.bytesIn.Load()
		st.BytesOut += sess.link.bytesOut.Load()
	}
	return st
}

// Open arms the receive function.
func (s *Server) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	recv, err := s.in.start()
	if err != nil {
		return nil, 0, err
	}
	return []conn.ReceiveFunc{recv}, port, nil
}

// Close makes the receive function return net.ErrClosed; sessions stay up
// (see Shutdown).
func (s *Server) Close() error {
	s.in.stop()
	return nil
}

// Send queues datagrams on the session ep names; see session.enqueue.
func (s *Server) Send(bufs [][]byte, ep conn.Endpoint) error {
	se, ok := ep.(*sessionEndpoint)
	if !ok {
		return conn.ErrWrongEndpointType
	}
	s.mu.Lock()
	sess := s.sessions[se.id]
	s.mu.Unlock()
	if sess == nil {
		return ErrSessionGone
	}
	sess.enqueue(bufs)
	return nil
}

// ParseEndpoint refuses every endpoint: server peers are reached only
// through the sessions they open.
func (s *Server) ParseEndpoint(str string) (conn.Endpoint, error) {
	return nil, fmt.Errorf("wsproxy: server endpoints come from sessions, not configuration (%q)", str)
}

func (s *Server) SetMark(uint32) error { return nil }
func (s *Server) BatchSize() int       { return batchSize }

// OffersSubprotocol reports whether a websocket upgrade request offers
// proto; servers refuse, before upgrading, clients that do not speak theirs.
func OffersSubprotocol(r *http.Request, proto string) bool {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if strings.TrimSpace(p) == proto {
				return true
			}
		}
	}
	return false
}
