package nsload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// loadConn is one open connection of a worker's group: its header went
// out, and for an echo the first sent bytes came back.
type loadConn struct {
	c         net.Conn
	h         header
	sent, got uint64
}

// dialFunc opens a TCP connection: net.Dialer's for a process, a
// netstack's for an in-process peer.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// netDial dials from the process's own network namespace.
var netDial dialFunc = (&net.Dialer{}).DialContext

// dialLoad connects to addr and starts a load connection: an echo is
// probed (the server answered), an upload has sent its header.
func dialLoad(ctx context.Context, dial dialFunc, addr string, h header) (*loadConn, error) {
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	lc := &loadConn{c: c, h: h}
	if h.mode == modeEcho {
		err = probe(ctx, c, h)
		lc.sent, lc.got = probeLen, probeLen
	} else {
		defer bindConn(ctx, c)()
		_, err = c.Write(h.marshal())
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return lc, nil
}

// finish sends the rest of the body, checks the answer and closes.
func (lc *loadConn) finish(ctx context.Context) error {
	defer lc.c.Close()
	switch lc.h.mode {
	case modeEcho:
		return echoRest(ctx, lc.c, lc.h, lc.sent, lc.got)
	case modeDownload:
		return download(ctx, lc.c, lc.h)
	}
	return upload(ctx, lc.c, lc.h)
}

// open dials n connections to addr, conc at a time, each within timeout,
// and keeps those that work as group (added to any already there).
func (w *worker) open(group, addr string, n, conc int, mode string, size uint64, timeout time.Duration) report {
	if len(mode) != 1 || !strings.ContainsRune("EUD", rune(mode[0])) || (mode[0] == modeEcho && size < probeLen) {
		return report{Err: fmt.Sprintf("mode %q size %d: want E (size >= %d), U or D", mode, size, probeLen)}
	}
	start := time.Now()
	t := newTally("open")
	conns := make([]*loadConn, n)
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = w.nextSeed()
	}
	forEach(n, conc, func(i int) {
		ctx, cancel := withTimeout(timeout)
		defer cancel()
		begin := time.Now()
		lc, err := dialLoad(ctx, netDial, addr, header{mode: mode[0], size: size, seed: seeds[i]})
		t.add(err, time.Since(begin), 0)
		conns[i] = lc
	})
	for _, lc := range conns {
		if lc != nil {
			w.groups[group] = append(w.groups[group], lc)
		}
	}
	return t.done(start)
}

// transfer finishes every connection of group at once, each within
// timeout, and forgets the group.
func (w *worker) transfer(group string, timeout time.Duration) report {
	conns, ok := w.groups[group]
	if !ok {
		return report{Err: "no group " + group}
	}
	delete(w.groups, group)
	start := time.Now()
	t := newTally("transfer")
	forEach(len(conns), len(conns), func(i int) {
		ctx, cancel := withTimeout(timeout)
		defer cancel()
		begin := time.Now()
		err := conns[i].finish(ctx)
		t.add(err, time.Since(begin), int64(conns[i].h.size))
	})
	return t.done(start)
}

// closeGroup closes every connection of group.
func (w *worker) closeGroup(group string) report {
	conns := w.groups[group]
	delete(w.groups, group)
	for _, lc := range conns {
		lc.c.Close()
	}
	return report{OK: len(conns)}
}

// try makes n attempts at once, each a connection to addr and an echo
// probe within timeout, and closes what worked: how refusals look to a
// client, and how long they take.
func try(dial dialFunc, addr string, n int, timeout time.Duration) report {
	return roundTrips(dial, addr, n, probeLen, timeout)
}

// roundTrips runs n echo flows of size bytes to addr at once, each
// within timeout.
func roundTrips(dial dialFunc, addr string, n int, size uint64, timeout time.Duration) report {
	start := time.Now()
	t := newTally("echo")
	base := uint64(time.Now().UnixNano())
	forEach(n, n, func(i int) {
		ctx, cancel := withTimeout(timeout)
		defer cancel()
		begin := time.Now()
		lc, err := dialLoad(ctx, dial, addr, header{mode: modeEcho, size: size, seed: base + uint64(i)})
		if err == nil {
			err = lc.finish(ctx)
		}
		t.add(err, time.Since(begin), int64(size))
	})
	return t.done(start)
}

// outcome names how an attempt ended.
func outcome(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, errCorrupt):
		return "corrupt"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}
