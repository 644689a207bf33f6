package wsproxy

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// session is one authenticated websocket on the server: a link, the
// endpoint WireGuard sees, and a bounded send queue drained by a writer
// goroutine the session owns.
type session struct {
	ep    *sessionEndpoint
	link  *link
	queue chan *[]byte
	pool  sync.Pool
	drops *atomic.Uint64
}

func newSession(ctx context.Context, ep *sessionEndpoint, ws *websocket.Conn, cork Corker, cfg ServerConfig, limit int, drops *atomic.Uint64) *session {
	s := &session{
		ep:    ep,
		link:  newLink(ctx, ws, cork, cfg.Keepalive, limit),
		queue: make(chan *[]byte, cfg.QueueLen),
		drops: drops,
	}
	s.pool.New = func() any { b := make([]byte, 0, limit); return &b }
	return s
}

// serve runs the session until its link ends; the writer stops first.
func (s *session) serve(in *inbox) error {
	var wg sync.WaitGroup
	wg.Go(s.writeLoop)
	err := s.link.serve(in, func() rxPacket { return rxPacket{ep: s.ep} })
	wg.Wait()
	s.drain()
	return err
}

// enqueue copies bufs into the queue, dropping what does not fit.
func (s *session) enqueue(bufs [][]byte) {
	for _, b := range bufs {
		p := s.pool.Get().(*[]byte)
		*p = append((*p)[:0], b...)
		select {
		case s.queue <- p:
		default:
			s.pool.Put(p)
			s.drops.Add(1)
		}
	}
}

func (s *session) writeLoop() {
	for {
		select {
		case <-s.link.ctx.Done():
			return
		case p := <-s.queue:
			err := s.link.write(*p)
			s.pool.Put(p)
			if err != nil {
				return
			}
		}
	}
}

// drain returns queued buffers after the writer stopped.
func (s *session) drain() {
	for {
		select {
		case p := <-s.queue:
			s.pool.Put(p)
		default:
			return
		}
	}
}
