package relay

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// UDPConfig configures ServeUDP.
type UDPConfig struct {
	// Dial opens the session of a new client: a connected datagram conn
	// whose reads are the replies to send back.
	Dial func(client netip.AddrPort) (net.Conn, error)
	// Idle closes a session without traffic either way for this long.
	Idle time.Duration
	// Admit, if set, is asked before a session opens; Release is called
	// when an admitted session ends.
	Admit   func() bool
	Release func()
	Logger  *slog.Logger
}

type session struct {
	conn net.Conn
	last atomic.Int64
}

func (s *session) touch() { s.last.Store(time.Now().UnixNano()) }

// ServeUDP answers datagrams on pc, one session per client address, until
// pc is closed; then it closes every session and waits for its goroutines.
func ServeUDP(pc net.PacketConn, cfg UDPConfig) {
	u := &udpFront{pc: pc, cfg: cfg, sessions: map[netip.AddrPort]*session{}}
	if u.cfg.Logger == nil {
		u.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	stop := make(chan struct{})
	u.wg.Go(func() { u.reap(stop) })
	u.readLoop()
	close(stop)
	u.closeAll()
	u.wg.Wait()
}

type udpFront struct {
	pc  net.PacketConn
	cfg UDPConfig
	wg  sync.WaitGroup

	mu       sync.Mutex
	sessions map[netip.AddrPort]*session
}

func (u *udpFront) readLoop() {
	buf := make([]byte, 65535)
	for {
		n, from, err := u.pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				u.cfg.Logger.Warn("udp relay read failed", "err", err)
			}
			return
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			continue
		}
		if s := u.session(ua.AddrPort()); s != nil {
			s.touch()
			_, _ = s.conn.Write(buf[:n])
		}
	}
}

// session returns the client's session, opening it if needed; nil when
// refused.
func (u *udpFront) session(client netip.AddrPort) *session {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s := u.sessions[client]; s != nil {
		return s
	}
	if u.cfg.Admit != nil && !u.cfg.Admit() {
		return nil
	}
	c, err := u.cfg.Dial(client)
	if err != nil {
		if u.cfg.Release != nil {
			u.cfg.Release()
		}
		u.cfg.Logger.Debug("udp relay session failed", "client", client, "err", err)
		return nil
	}
	s := &session{conn: c}
	s.touch()
	u.sessions[client] = s
	u.wg.Go(func() { u.replies(client, s) })
	return s
}

// replies sends the session's datagrams back to the client until its conn
// is closed.
func (u *udpFront) replies(client netip.AddrPort, s *session) {
	defer func() {
		u.mu.Lock()
		if u.sessions[client] == s {
			delete(u.sessions, client)
		}
		u.mu.Unlock()
		s.conn.Close()
		if u.cfg.Release != nil {
			u.cfg.Release()
		}
	}()
	to := net.UDPAddrFromAddrPort(client)
	buf := make([]byte, 65535)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return
		}
		s.touch()
		if _, err := u.pc.WriteTo(buf[:n], to); err != nil {
			return
		}
	}
}

func (u *udpFront) reap(stop <-chan struct{}) {
	t := time.NewTicker(max(u.cfg.Idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			u.mu.Lock()
			for _, s := range u.sessions {
				if now.Sub(time.Unix(0, s.last.Load())) > u.cfg.Idle {
					s.conn.Close()
				}
			}
			u.mu.Unlock()
		}
	}
}

func (u *udpFront) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range u.sessions {
		s.conn.Close()
	}
}
