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

// backoffState counts consecutive failures. Not safe for concurrent use.
type backoffState struct {
	cfg      Backoff
	attempts int
}

// next is the delay before the next attempt: a uniform draw from [d/2, d]
// where d doubles per attempt up to Max. The jitter spreads the reconnects
// of many launchers after a sidecar restart.
func (s *backoffState) next() time.Duration {
	d := s.cfg.Initial
	for i := 0; i < s.attempts && d < s.cfg.Max; i++ {
		d *= 2
	}
	d = min(d, s.cfg.Max)
	s.attempts++
	half := d / 2
	return half + rand.N(d-half+1)
}

func (s *backoffState) reset() { s.attempts = 0 }

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
