package tunnel

import (
	"net"
	"net/http"
	"time"
)

// pendingConn is a pod connection waiting for its data websocket.
type pendingConn struct {
	conn  net.Conn
	timer *time.Timer
}

// drop resets the pod client's connection.
func (p *pendingConn) drop() {
	p.timer.Stop()
	resetLocal(p.conn)
}

// addPending parks c under id for pendingTTL; false if shutting down or
// MaxConns connections are already pending (c is then reset).
func (s *Server) addPending(id string, c net.Conn) bool {
	p := &pendingConn{conn: c}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || len(s.pending) >= s.cfg.MaxConns {
		s.counters.rejected.Add(1)
		resetLocal(c)
		return false
	}
	p.timer = time.AfterFunc(pendingTTL, func() {
		if p := s.takePending(id); p != nil {
			s.log.Info("tunnel: reverse connection not claimed in time", "client", p.conn.RemoteAddr().String())
			p.drop()
		}
	})
	s.pending[id] = p
	return true
}

// takePending removes and returns the connection under id, or nil.
func (s *Server) takePending(id string) *pendingConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[id]
	delete(s.pending, id)
	return p
}

// serveAccept pairs a data websocket with its pending pod connection.
// With ?error=TEXT the client says it could not reach its local service:
// the pod connection is reset at once.
func (s *Server) serveAccept(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := s.takePending(q.Get("id"))
	if p == nil {
		http.Error(w, "reverse connection id unknown or expired", http.StatusNotFound)
		return
	}
	p.timer.Stop()
	if e := q.Get("error"); e != "" {
		s.log.Info("tunnel: reverse connection refused by the client", "client", p.conn.RemoteAddr().String(), "reason", e)
		p.drop()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ws, release, ok := s.upgrade(w, r)
	if !ok {
		p.drop()
		return
	}
	defer release()
	tc, ok := p.conn.(localConn)
	if !ok {
		p.drop()
		_ = ws.CloseNow()
		return
	}
	s.counters.streams.Add(1)
	s.counters.open.Add(1)
	up, down := splice(s.ctx, ws, tc, s.ka)
	s.counters.open.Add(-1)
	s.counters.bytesUp.Add(uint64(up))
	s.counters.bytesDown.Add(uint64(down))
}
