package wsproxy

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff configures reconnect delays: exponential from Initial to Max with
// jitter, reset once a connection has stayed up for StableAfter.
type Backoff struct {
	Initial     time.Duration // default 250ms
	Max         time.Duration // default 30s
	StableAfter time.Duration // default 30s
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 250 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.StableAfter <= 0 {
		b.StableAfter = 30 * time.Second
	}
	return b
}

// Retry starts counting failed attempts under b (with defaults filled in).
// Every client that reconnects to a sidecar (the mesh, the tunnel's
// reverse control) spaces its attempts with one.
func (b Backoff) Retry() *Retry { return &Retry{cfg: b.withDefaults()} }

// Retry counts consecutive failures. Not safe for concurrent use.
type Retry struct {
	cfg      Backoff
	attempts int
}

// Next is the delay before the next attempt: a uniform draw from [d/2, d]
// where d doubles per attempt up to Max. The jitter spreads the reconnects
// of many clients after a sidecar restart.
func (r *Retry) Next() time.Duration {
	d := r.cfg.Initial
	for i := 0; i < r.attempts && d < r.cfg.Max; i++ {
		d *= 2
	}
	d = min(d, r.cfg.Max)
	r.attempts++
	half := d / 2
	return half + rand.N(d-half+1)
}

// Connected resets the delays if the connection that just ended had
// stayed up for StableAfter.
func (r *Retry) Connected(up time.Duration) {
	if up >= r.cfg.StableAfter {
		r.attempts = 0
	}
}

// Wait sleeps for Next() or until ctx ends; it reports whether the delay
// elapsed.
func (r *Retry) Wait(ctx context.Context) bool { return sleep(ctx, r.Next()) }

// sleep waits for d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
