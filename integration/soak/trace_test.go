package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"
)

// errNoResponse marks a request that failed before any of the response
// arrived: no byte of a flow was delivered, so none can have been lost.
var errNoResponse = errors.New("no response")

// phases records how far a request got, for the error of one that fails:
// a stall reads differently in the name lookup, the connect, or after the
// request was sent.
type phases struct {
	mu    sync.Mutex
	start time.Time
	last  string
	local string
}

func (p *phases) mark(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = fmt.Sprintf("%s at +%v", s, time.Since(p.start).Round(time.Millisecond))
}

func (p *phases) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.local == "" {
		return "last step: " + p.last
	}
	return fmt.Sprintf("last step: %s, local address %s", p.last, p.local)
}

// withPhases returns ctx traced into a new phases.
func withPhases(ctx context.Context) (context.Context, *phases) {
	p := &phases{start: time.Now(), last: "started"}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		DNSStart:     func(httptrace.DNSStartInfo) { p.mark("name lookup started") },
		DNSDone:      func(httptrace.DNSDoneInfo) { p.mark("name looked up") },
		ConnectStart: func(string, string) { p.mark("connect started") },
		GotConn: func(i httptrace.GotConnInfo) {
			p.mark("connected")
			p.mu.Lock()
			p.local = i.Conn.LocalAddr().String()
			p.mu.Unlock()
		},
		WroteRequest:         func(httptrace.WroteRequestInfo) { p.mark("request sent") },
		GotFirstResponseByte: func() { p.mark("first response byte") },
	}), p
}

// refusedAtConnect reports whether err is a failure before any response
// byte with the peer refusing, resetting or closing the connection (the
// request may have been written already: EPIPE; or the close read first:
// EOF).
func refusedAtConnect(err error) bool {
	if !errors.Is(err, errNoResponse) {
		return false
	}
	for _, e := range []error{syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
