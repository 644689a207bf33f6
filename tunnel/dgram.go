package tunnel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// dgramQueue bounds datagrams waiting for a session's websocket; a full
// queue drops, as a congested UDP path would.
const dgramQueue = 256

// dgramSession carries one UDP session over a websocket, one binary message
// per datagram. It ends after idle without a datagram in either direction,
// when ws fails, or when its context ends.
type dgramSession struct {
	toWS    chan []byte
	deliver func(p []byte) // the peer's datagram to the local side; must not block long
	idle    time.Duration
	ka      keepalive
	last    atomic.Int64 // unix nanos of the last datagram either way
	drops   atomic.Uint64
}

func newDgramSession(idle time.Duration, ka keepalive, deliver func([]byte)) *dgramSession {
	s := &dgramSession{toWS: make(chan []byte, dgramQueue), deliver: deliver, idle: idle, ka: ka}
	s.touch()
	return s
}

func (s *dgramSession) touch() { s.last.Store(time.Now().UnixNano()) }

// offer queues a copy of p for the websocket; it never blocks.
func (s *dgramSession) offer(p []byte) {
	s.touch()
	select {
	case s.toWS <- append([]byte(nil), p...):
	default:
		s.drops.Add(1)
	}
}

// run serves ws until the session ends, then closes ws. It returns after
// every goroutine it started has ended.
func (s *dgramSession) run(ctx context.Context, ws *wsConn) {
	ws.SetReadLimit(maxDatagram)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Go(func() { cancel(s.readLoop(ws)) })
	wg.Go(func() { cancel(s.writeLoop(ctx, ws)) })
	wg.Go(func() { cancel(pingLoop(ctx, ws, s.ka, nil)) })
	wg.Go(func() { cancel(s.idleLoop(ctx)) })
	<-ctx.Done()
	code, reason := websocket.StatusGoingAway, "shutting down"
	if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
		code, reason = StatusIdle, "idle"
	}
	_ = ws.Close(code, reason)
	wg.Wait()
}

var errIdle = errors.New("tunnel: udp session idle")

func (s *dgramSession) readLoop(ws *wsConn) error {
	for {
		typ, p, err := ws.Read(context.Background()) // ends when ws is closed
		if err != nil {
			return err
		}
		if typ != websocket.MessageBinary {
			return errors.New("tunnel: protocol error: text message on a udp session")
		}
		s.touch()
		s.deliver(p)
	}
}

func (s *dgramSession) writeLoop(ctx context.Context, ws *wsConn) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-s.toWS:
			if err := writeMessage(ctx, ws, s.ka, websocket.MessageBinary, p); err != nil {
				return err
			}
		}
	}
}

func (s *dgramSession) idleLoop(ctx context.Context) error {
	t := time.NewTicker(max(s.idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if time.Since(time.Unix(0, s.last.Load())) >= s.idle {
				return errIdle
			}
		}
	}
}
