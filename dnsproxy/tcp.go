package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

var tcpTransport = transport{network: "tcp", exchange: exchangeTCP}

// ServeTCP serves DNS over TCP (2-byte length prefix, several queries per
// connection, answered concurrently and possibly out of order as RFC 7766
// allows) on ln until ctx ends or Accept fails; running out of file
// descriptors or memory is waited out, not a failure. Queries are forwarded
// over TCP, bounded by MaxInFlight; connections are bounded by MaxTCPConns
// and closed after TCPIdle without a query.
//
// ServeTCP owns ln and the connections it accepts: it closes them when ctx
// ends and before it returns. It returns after every goroutine it started has
// finished: nil when ctx ended, otherwise the error that made Accept fail.
func (f *Forwarder) ServeTCP(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWatch := closeWhenDone(ctx, ln)
	var wg sync.WaitGroup
	err := f.accept(ctx, ln, &wg)
	cancel() // closes ln and every connection, aborts in-flight queries
	stopWatch()
	wg.Wait()
	return err
}

// accept accepts connections and starts a goroutine in wg for each one
// admitted.
func (f *Forwarder) accept(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) error {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !isResourceShortage(err) {
				return fmt.Errorf("dnsproxy: serve tcp: %w", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			f.log.Debug("dnsproxy: tcp accept, retrying", "err", err, "backoff", backoff)
			sleep(ctx, backoff)
			continue
		}
		backoff = 0
		select {
		case f.conns <- struct{}{}:
		default:
			f.stats.dropped.Add(1)
			f.log.Debug("dnsproxy: tcp connection closed: too many", "from", c.RemoteAddr(), "max", cap(f.conns))
			c.Close()
			continue
		}
		wg.Go(func() {
			defer func() { <-f.conns }()
			f.serveConn(ctx, c)
		})
	}
}

// isResourceShortage reports whether an Accept error is a passing shortage
// (out of file descriptors or memory) that should not stop the server.
func isResourceShortage(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// serveConn reads queries from c until EOF, idle timeout, a malformed query,
// the in-flight cap or ctx ends; then it waits for the replies still owed
// and closes c.
func (f *Forwarder) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	defer closeWhenDone(ctx, c)()
	var wg sync.WaitGroup
	defer wg.Wait()
	w := &tcpWriter{c: c, timeout: f.cfg.TCPIdle}
	for {
		msg, err := f.readQuery(c)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				f.log.Debug("dnsproxy: tcp read", "from", c.RemoteAddr(), "err", err)
			}
			return
		}
		// A malformed message may mean lost framing: stop reading.
		q, ok := f.parse(msg, c.RemoteAddr())
		if !ok || !f.acquire(c.RemoteAddr()) {
			return
		}
		wg.Go(func() {
			defer f.release()
			f.answerTCP(ctx, w, q)
		})
	}
}

// readQuery reads one message from c, waiting at most TCPIdle.
func (f *Forwarder) readQuery(c net.Conn) ([]byte, error) {
	if err := c.SetReadDeadline(time.Now().Add(f.cfg.TCPIdle)); err != nil {
		return nil, err
	}
	return readMsg(c)
}

// answerTCP forwards q and writes the reply with w.
func (f *Forwarder) answerTCP(ctx context.Context, w *tcpWriter, q query) {
	reply, answered := f.resolve(ctx, q, tcpTransport)
	if reply == nil {
		return
	}
	f.count(answered) // before the send, so a client that has its reply sees it counted
	if err := w.write(reply); err != nil {
		f.log.Debug("dnsproxy: send tcp reply", "to", w.c.RemoteAddr(), "err", err)
	}
}

// tcpWriter serialises the replies written to one client connection.
type tcpWriter struct {
	mu      sync.Mutex
	c       net.Conn
	timeout time.Duration
}

func (w *tcpWriter) write(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.c.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	return writeMsg(w.c, msg)
}

// exchangeTCP sends q over the TCP connection c and reads one reply.
func exchangeTCP(c net.Conn, q query) ([]byte, error) {
	if err := writeMsg(c, q.raw); err != nil {
		return nil, err
	}
	reply, err := readMsg(c)
	if err != nil {
		return nil, err
	}
	if err := checkReply(q, reply); err != nil {
		return nil, err
	}
	return reply, nil
}
