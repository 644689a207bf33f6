package dnsproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

const (
	defaultTimeout     = 2 * time.Second
	defaultMaxInFlight = 1024
	defaultMaxTCPConns = 256
	defaultTCPIdle     = 10 * time.Second
)

// Config configures a Forwarder. Zero values take the documented defaults;
// negative ones are an error.
type Config struct {
	// Upstreams are the resolvers queries are forwarded to, tried in order
	// (usually the pod's nameservers, port 53). Required.
	Upstreams []netip.AddrPort
	// Timeout bounds one upstream attempt (dial, send, reply); on timeout
	// the next upstream is tried once. Default 2s.
	Timeout time.Duration
	// MaxInFlight caps the queries forwarded at once, across UDP and TCP.
	// Over it, UDP queries are dropped (counted) and TCP connections closed.
	// Default 1024.
	MaxInFlight int
	// MaxTCPConns caps open client TCP connections. Default 256.
	MaxTCPConns int
	// TCPIdle closes a client TCP connection that sends no query for this
	// long; it also bounds writing one reply to it. Default 10s.
	TCPIdle time.Duration
	// Dial opens upstream sockets. Default (&net.Dialer{}).DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives per-query problems, at debug level only. Nil discards.
	Logger *slog.Logger
}

// Forwarder forwards DNS queries to upstream resolvers. It is safe for
// concurrent use; it has no goroutines of its own, so it needs no Close.
type Forwarder struct {
	cfg   Config
	log   *slog.Logger
	slots chan struct{} // one per query in flight, UDP and TCP
	conns chan struct{} // one per open client TCP connection
	stats counters
}

// Stats are counters since New. Queries counts every message received over
// UDP or TCP; each ends up Answered (an upstream reply was relayed), Failed
// (SERVFAIL sent because every upstream failed), Dropped (shed because
// MaxInFlight was reached), Malformed, or uncounted when the serve context
// ended first. A reply is counted just before it is sent; a failed send is
// only logged. Dropped also counts TCP connections
// closed on accept because MaxTCPConns was reached. InFlight is the number of
// queries being forwarded now.
type Stats struct {
	Queries, Answered, Failed, Dropped, Malformed uint64
	InFlight                                      int
}

type counters struct {
	queries, answered, failed, dropped, malformed atomic.Uint64
}

// New checks cfg and returns a Forwarder.
func New(cfg Config) (*Forwarder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("dnsproxy: new: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Forwarder{
		cfg:   cfg,
		log:   log,
		slots: make(chan struct{}, cfg.MaxInFlight),
		conns: make(chan struct{}, cfg.MaxTCPConns),
	}, nil
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Upstreams) == 0 {
		return c, errors.New("no upstream")
	}
	for _, u := range c.Upstreams {
		if !u.IsValid() || u.Port() == 0 {
			return c, fmt.Errorf("invalid upstream %v", u)
		}
	}
	if c.Timeout < 0 || c.MaxInFlight < 0 || c.MaxTCPConns < 0 || c.TCPIdle < 0 {
		return c, errors.New("negative limit")
	}
	c.Upstreams = slices.Clone(c.Upstreams)
	c.Timeout = cmp.Or(c.Timeout, defaultTimeout)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, defaultMaxInFlight)
	c.MaxTCPConns = cmp.Or(c.MaxTCPConns, defaultMaxTCPConns)
	c.TCPIdle = cmp.Or(c.TCPIdle, defaultTCPIdle)
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	return c, nil
}

// Stats returns a snapshot of the counters.
func (f *Forwarder) Stats() Stats {
	return Stats{
		Queries:   f.stats.queries.Load(),
		Answered:  f.stats.answered.Load(),
		Failed:    f.stats.failed.Load(),
		Dropped:   f.stats.dropped.Load(),
		Malformed: f.stats.malformed.Load(),
		InFlight:  len(f.slots),
	}
}

// parse counts a received message and parses it as a query; it reports
// false, having counted it, for a malformed one.
func (f *Forwarder) parse(msg []byte, from net.Addr) (query, bool) {
	f.stats.queries.Add(1)
	q, err := parseQuery(msg)
	if err != nil {
		f.stats.malformed.Add(1)
		f.log.Debug("dnsproxy: malformed query dropped", "from", from, "err", err)
		return query{}, false
	}
	return q, true
}

// acquire takes an in-flight slot without waiting; it reports false, having
// counted a drop, when MaxInFlight queries are in flight.
func (f *Forwarder) acquire(from net.Addr) bool {
	select {
	case f.slots <- struct{}{}:
		return true
	default:
	}
	f.stats.dropped.Add(1)
	f.log.Debug("dnsproxy: query dropped: too many in flight", "from", from, "max", cap(f.slots))
	return false
}

func (f *Forwarder) release() { <-f.slots }

// transport is one way of exchanging a query with an upstream.
type transport struct {
	network  string
	exchange func(c net.Conn, q query) ([]byte, error)
}

// resolve forwards q to the upstreams in order and returns the reply to send:
// the first valid upstream reply (answered true), or SERVFAIL when every
// upstream failed. It returns nil when ctx ended.
func (f *Forwarder) resolve(ctx context.Context, q query, t transport) (reply []byte, answered bool) {
	for _, up := range f.cfg.Upstreams {
		reply, err := f.attempt(ctx, up, q, t)
		if err == nil {
			return reply, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		f.log.Debug("dnsproxy: upstream failed", "name", q.q.Name.String(), "err", err)
	}
	reply, err := servfail(q)
	if err != nil {
		f.log.Debug("dnsproxy: build SERVFAIL", "name", q.q.Name.String(), "err", err)
		return nil, false
	}
	return reply, false
}

// attempt exchanges q with one upstream on a new socket, bounded by Timeout.
func (f *Forwarder) attempt(ctx context.Context, up netip.AddrPort, q query, t transport) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	c, err := f.cfg.Dial(ctx, t.network, up.String())
	if err != nil {
		return nil, fmt.Errorf("dnsproxy: dial %s %v: %w", t.network, up, err)
	}
	defer c.Close()
	defer closeWhenDone(ctx, c)()
	reply, err := t.exchange(c, q)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // the socket was closed because of it: say so
		}
		return nil, fmt.Errorf("dnsproxy: exchange %s %v: %w", t.network, up, err)
	}
	return reply, nil
}

// count records the outcome of a reply about to be sent.
func (f *Forwarder) count(answered bool) {
	if answered {
		f.stats.answered.Add(1)
	} else {
		f.stats.failed.Add(1)
	}
}

// closeWhenDone closes c when ctx ends, which unblocks its readers and
// writers. The returned stop function ends the watch; if the close has
// already started, stop waits for it, so no goroutine outlives the caller.
func closeWhenDone(ctx context.Context, c io.Closer) (stop func()) {
	closed := make(chan struct{})
	cancelWatch := context.AfterFunc(ctx, func() {
		c.Close()
		close(closed)
	})
	return func() {
		if !cancelWatch() {
			<-closed
		}
	}
}
