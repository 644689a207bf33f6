package wsproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Keepalive configures pings on an established websocket.
type Keepalive struct {
	// Interval between pings. Default 20s: below the 60s idle timeout of
	// common Ingress controllers and proxies.
	Interval time.Duration
	// Timeout for the pong; a peer that misses it is dead. Default 15s.
	// It also bounds how long a message that has begun may go without
	// payload arriving: a message that never ends (a flood of empty
	// continuation frames) ends the link; a slow one does not.
	Timeout time.Duration
	// WriteTimeout bounds the write of one message. Default 10s.
	WriteTimeout time.Duration
}

func (k Keepalive) withDefaults() Keepalive {
	if k.Interval <= 0 {
		k.Interval = 20 * time.Second
	}
	if k.Timeout <= 0 {
		k.Timeout = 15 * time.Second
	}
	if k.WriteTimeout <= 0 {
		k.WriteTimeout = 10 * time.Second
	}
	return k
}

// errWriteTimeout ends a link whose peer does not read.
var errWriteTimeout = errors.New("wsproxy: write deadline exceeded")

// errMessageTimeout ends a link whose peer starts a message but does not
// finish it in time.
var errMessageTimeout = errors.New("wsproxy: message not completed within the keepalive timeout")

// link is one established websocket carrying datagrams. It is shared by the
// client and the server: a reader (run by whoever calls serve), a pinger
// goroutine it owns, and writes bounded by a deadline.
type link struct {
	c     *websocket.Conn
	cork  Corker
	ka    Keepalive
	ctx   context.Context // alive until the link fails or is closed
	stop  context.CancelCauseFunc
	limit int

	wmu    sync.Mutex
	wtimer *time.Timer
	rtimer *time.Timer // armed while a message is being read

	bytesIn, bytesOut atomic.Uint64
}

func newLink(parent context.Context, c *websocket.Conn, cork Corker, ka Keepalive, limit int) *link {
	c.SetReadLimit(int64(limit))
	l := &link{c: c, cork: cork, ka: ka, limit: limit}
	l.ctx, l.stop = context.WithCancelCause(parent)
	l.wtimer = time.AfterFunc(math.MaxInt64, func() { l.fail(errWriteTimeout) })
	l.wtimer.Stop()
	l.rtimer = time.AfterFunc(math.MaxInt64, func() { l.fail(errMessageTimeout) })
	l.rtimer.Stop()
	return l
}

// fail ends the link at once, recording why.
func (l *link) fail(err error) {
	l.stop(err)
	_ = l.c.CloseNow()
}

// closeWith ends the link with a close handshake carrying code and reason.
// The close frame goes out before the link's context ends: ending it first
// would make the reader drop the connection without a close frame. It may
// block for the handshake (at most a few seconds).
func (l *link) closeWith(code websocket.StatusCode, reason string) {
	_ = l.c.Close(code, reason)
	l.stop(fmt.Errorf("wsproxy: closed locally: %s", reason))
}

// write sends p as one binary message within the write timeout.
func (l *link) write(p []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.wtimer.Reset(l.ka.WriteTimeout)
	err := WriteCorked(l.ctx, l.c, l.cork, websocket.MessageBinary, p)
	l.wtimer.Stop()
	if err != nil {
		l.fail(err)
		return fmt.Errorf("wsproxy: write: %w", err)
	}
	l.bytesOut.Add(uint64(len(p)))
	return nil
}

// serve reads datagrams and hands each to deliver until the link ends; it
// runs the pinger meanwhile and returns only after the pinger stopped. The
// error says why the link ended.
func (l *link) serve(in *inbox, ep func() rxPacket) error {
	var wg sync.WaitGroup
	wg.Go(l.pingLoop)
	err := l.readLoop(in, ep)
	l.fail(err)
	wg.Wait()
	if cause := context.Cause(l.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

func (l *link) readLoop(in *inbox, ep func() rxPacket) error {
	for {
		typ, r, err := l.c.Reader(l.ctx)
		if err != nil {
			return fmt.Errorf("wsproxy: read: %w", err)
		}
		if typ != websocket.MessageBinary {
			l.closeWith(websocket.StatusUnsupportedData, "binary messages only")
			return errors.New("wsproxy: peer sent a text message")
		}
		p := ep()
		p.buf = in.getBuf()
		n, err := l.readMessage(r, *p.buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			in.putBuf(p.buf)
			return fmt.Errorf("wsproxy: read message: %w", err)
		}
		if n > l.limit {
			in.putBuf(p.buf)
			l.closeWith(websocket.StatusMessageTooBig, "message exceeds the read limit")
			return fmt.Errorf("wsproxy: peer sent a message over %d bytes", l.limit)
		}
		if n == 0 {
			in.putBuf(p.buf) // empty messages carry nothing
			continue
		}
		l.bytesIn.Add(uint64(n))
		p.n = n
		in.deliver(l.ctx, p)
	}
}

// readMessage reads the message r into buf, like io.ReadFull. The link
// fails if no payload arrives for the keepalive timeout: a slow carrier
// keeps a large message going, a flood of empty continuation frames does
// not.
func (l *link) readMessage(r io.Reader, buf []byte) (int, error) {
	l.rtimer.Reset(l.ka.Timeout)
	defer l.rtimer.Stop()
	total := 0
	for total < len(buf) {
		n, err := r.Read(buf[total:])
		if n > 0 {
			total += n
			l.rtimer.Reset(l.ka.Timeout)
		}
		if err != nil {
			if errors.Is(err, io.EOF) && total > 0 {
				err = io.ErrUnexpectedEOF
			}
			return total, err
		}
	}
	return total, nil
}

func (l *link) pingLoop() {
	t := time.NewTicker(l.ka.Interval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		in := l.bytesIn.Load()
		ctx, cancel := context.WithTimeout(l.ctx, l.ka.Timeout)
		err := l.c.Ping(ctx)
		cancel()
		// Data that arrived meanwhile proves the peer alive: on a slow,
		// congested carrier the pong waits behind it, late but not lost.
		if err != nil && l.ctx.Err() == nil && l.bytesIn.Load() == in {
			l.fail(fmt.Errorf("wsproxy: no pong within %s: %w", l.ka.Timeout, err))
			return
		}
	}
}
