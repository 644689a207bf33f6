package sidecar

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// udpSession carries one client's datagrams to the job and back.
type udpSession struct {
	conn net.Conn // in the netstack, from the client's address to the job
	last atomic.Int64
}

func (u *udpSession) touch() { u.last.Store(time.Now().UnixNano()) }

func (u *udpSession) idle(now time.Time) bool {
	return now.Sub(time.Unix(0, u.last.Load())) > udpIngressIdle
}

// serveUDP forwards datagrams arriving on pc, one session per client.
func (in *ingress) serveUDP(pc net.PacketConn, port uint16) {
	var (
		mu       sync.Mutex
		sessions = map[netip.AddrPort]*udpSession{}
		flows    sync.WaitGroup
	)
	defer flows.Wait()
	defer func() {
		mu.Lock()
		for _, s := range sessions {
			s.conn.Close()
		}
		mu.Unlock()
	}()
	stop := make(chan struct{})
	defer close(stop)
	flows.Go(func() { in.reapUDP(stop, &mu, sessions) })
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				in.log.Warn("ingress udp read failed", "port", port, "err", err)
			}
			return
		}
		src, ok := addrPortOf(from)
		if !ok {
			continue
		}
		mu.Lock()
		s := sessions[src]
		if s == nil {
			s = in.openUDP(pc, src, port, &flows, func() {
				mu.Lock()
				delete(sessions, src)
				mu.Unlock()
			})
			if s != nil {
				sessions[src] = s
			}
		}
		mu.Unlock()
		if s != nil {
			s.touch()
			_, _ = s.conn.Write(buf[:n])
		}
	}
}

// openUDP starts a session for src, or returns nil over the cap.
func (in *ingress) openUDP(pc net.PacketConn, src netip.AddrPort, port uint16, flows *sync.WaitGroup, done func()) *udpSession {
	if !in.admit() {
		return nil
	}
	c, err := in.stack.DialUDP(in.source(src), netip.AddrPortFrom(in.job, port))
	if err != nil {
		in.release()
		in.log.Debug("ingress udp session failed", "client", src, "err", err)
		return nil
	}
	s := &udpSession{conn: c}
	s.touch()
	flows.Go(func() {
		defer in.release()
		defer done()
		in.replyUDP(pc, s, net.UDPAddrFromAddrPort(src))
	})
	return s
}

// replyUDP sends the job's datagrams back to the client until the
// session's conn is closed (by the reaper or shutdown).
func (in *ingress) replyUDP(pc net.PacketConn, s *udpSession, to *net.UDPAddr) {
	buf := make([]byte, 65535)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return
		}
		s.touch()
		if _, err := pc.WriteTo(buf[:n], to); err != nil {
			return
		}
	}
}

// reapUDP closes idle sessions until the ingress is stopped.
func (in *ingress) reapUDP(stop <-chan struct{}, mu *sync.Mutex, sessions map[netip.AddrPort]*udpSession) {
	t := time.NewTicker(udpIngressIdle / 4)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			mu.Lock()
			for _, s := range sessions {
				if s.idle(now) {
					s.conn.Close()
				}
			}
			mu.Unlock()
		}
	}
}
