package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// localConn is the local side of a stream: a TCP connection, or stdio.
type localConn interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// streamEvent is what a splice goroutine reports to the orchestrator.
type streamEvent struct {
	kind int
	err  error
}

const (
	evUpDone   = iota // local EOF was sent as an empty message (err nil) or the local read failed
	evDownEOF         // the peer's empty message arrived: local write side closed
	evDownEnd         // the websocket read side ended
	evPingFail        // keepalive failed
)

// splice carries a byte stream between ws and local until both directions
// have ended, ctx ends, or either side fails; it then closes both and
// returns after every goroutine it started has ended. It returns the bytes
// moved up (local to ws) and down.
//
// Wire format: binary messages carry data; an empty binary message is EOF
// in that direction (half-close, CloseWrite on the other end). After both
// directions have sent EOF each end closes with 1000. Any other ending is
// an abort: the websocket is closed with StatusReset (or 1001 when ctx
// ends) and the local connection is reset.
func splice(ctx context.Context, ws *wsConn, local localConn, ka keepalive) (up, down int64) {
	ws.SetReadLimit(maxMessage)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var busy atomic.Int32
	ev := make(chan streamEvent, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		up, err = copyUp(ws, local, &busy)
		ev <- streamEvent{evUpDone, err}
	})
	wg.Go(func() {
		var err error
		down, err = copyDown(ws, local, &busy, ev)
		ev <- streamEvent{evDownEnd, err}
	})
	wg.Go(func() {
		if err := pingLoop(ctx, ws, ka, func() bool { return busy.Load() > 0 }); err != nil {
			ev <- streamEvent{evPingFail, err}
		}
	})
	finish(ctx, ws, local, ev)
	cancel()
	wg.Wait()
	return up, down
}

// finish waits for a graceful end or an abort and closes both sides.
func finish(ctx context.Context, ws *wsConn, local localConn, ev <-chan streamEvent) {
	upDone, eofIn := false, false
	for !upDone || !eofIn {
		select {
		case <-ctx.Done():
			abort(ws, local, websocket.StatusGoingAway, "shutting down")
			return
		case e := <-ev:
			switch {
			case e.kind == evUpDone && e.err == nil:
				upDone = true
			case e.kind == evDownEOF:
				eofIn = true
			case e.kind == evDownEnd && eofIn && websocket.CloseStatus(e.err) == websocket.StatusNormalClosure:
				// The peer saw our EOF and closed first; copyUp is
				// about to report it.
			case e.kind == evPingFail:
				resetLocal(local)
				_ = ws.CloseNow()
				return
			default:
				abort(ws, local, StatusReset, "reset")
				return
			}
		}
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	_ = local.Close()
}

// abort resets the local side and closes ws with code.
func abort(ws *wsConn, local localConn, code websocket.StatusCode, reason string) {
	resetLocal(local)
	_ = ws.Close(code, reason)
}

// resetLocal closes a TCP connection with RST, so the local client sees
// the failure instead of a clean EOF; other connections just close.
func resetLocal(c io.Closer) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// copyUp sends local's bytes as binary messages and EOF as an empty one.
func copyUp(ws *wsConn, local io.Reader, busy *atomic.Int32) (int64, error) {
	// Data writes have no deadline: a slow but live peer applies
	// backpressure, exactly as TCP does. Dead peers are found by pings
	// and closed with CloseNow, which unblocks the write.
	wctx := context.Background()
	buf := make([]byte, maxMessage)
	var total int64
	for {
		n, rerr := local.Read(buf)
		if n > 0 {
			busy.Add(1)
			err := ws.Write(wctx, websocket.MessageBinary, buf[:n])
			busy.Add(-1)
			if err != nil {
				return total, fmt.Errorf("tunnel: send: %w", err)
			}
			total += int64(n)
		}
		if errors.Is(rerr, io.EOF) {
			return total, sendEOF(ws)
		}
		if rerr != nil {
			return total, fmt.Errorf("tunnel: read local: %w", rerr)
		}
	}
}

func sendEOF(ws *wsConn) error {
	if err := ws.Write(context.Background(), websocket.MessageBinary, nil); err != nil {
		return fmt.Errorf("tunnel: send EOF: %w", err)
	}
	return nil
}

// copyDown writes the peer's messages to local until the websocket ends.
// After the EOF message it keeps reading, so pongs and the close frame are
// processed; any further data is a protocol error.
func copyDown(ws *wsConn, local localConn, busy *atomic.Int32, ev chan<- streamEvent) (int64, error) {
	rctx := context.Background() // reads end when ws is closed
	var total int64
	eof := false
	for {
		typ, r, err := ws.Reader(rctx)
		if err != nil {
			return total, err
		}
		if typ != websocket.MessageBinary || eof {
			_ = ws.Close(websocket.StatusProtocolError, "unexpected message")
			return total, errors.New("tunnel: protocol error: unexpected message")
		}
		busy.Add(1)
		buf := messageBufs.Get().(*[]byte) // held only while a message is copied
		n, err := copyMessage(local, r, *buf)
		messageBufs.Put(buf)
		busy.Add(-1)
		total += n
		if err != nil {
			return total, fmt.Errorf("tunnel: %w", err)
		}
		if n == 0 {
			eof = true
			_ = local.CloseWrite()
			ev <- streamEvent{kind: evDownEOF}
		}
	}
}

// messageBufs hold one message on its way to the local socket. A stream
// waiting for its next message holds none, so idle streams cost no
// buffer on this side.
var messageBufs = sync.Pool{New: func() any { b := make([]byte, maxMessage); return &b }}

// copyMessage writes one message from r to w, gathering as much of it as
// buf holds before each write: the message arrives in pieces of whatever
// size the proxies in between forward (nginx: 4 KiB by default), and one
// write per piece would cost a syscall each.
func copyMessage(w io.Writer, r io.Reader, buf []byte) (int64, error) {
	var total int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return total, fmt.Errorf("write local: %w", werr)
			}
			total += int64(n)
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return total, nil
		case err != nil:
			return total, fmt.Errorf("read message: %w", err)
		}
	}
}
