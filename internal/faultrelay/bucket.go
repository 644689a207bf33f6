package faultrelay

import (
	"context"
	"sync"
	"time"
)

// bucket is a token bucket kept as a virtual clock (GCRA): next is when
// every byte taken so far is paid for; idle time builds up credit of at
// most one burst.
type bucket struct {
	mu   sync.Mutex
	next time.Time
}

// burstBytes is the bucket's depth at rate: 20 ms of traffic, at least
// 1 KiB. It is also the largest read of a throttled direction, so every
// chunk fits in one burst.
func burstBytes(rate int64) int {
	return int(max(rate/50, 1024))
}

// take waits until n bytes may pass at rate, or ctx ends.
func (b *bucket) take(ctx context.Context, n int, rate int64) error {
	b.mu.Lock()
	now := time.Now()
	credit := bytesTime(int64(burstBytes(rate)), rate)
	b.next = later(b.next, now.Add(-credit)).Add(bytesTime(int64(n), rate))
	wake := b.next.Add(-credit)
	b.mu.Unlock()
	return sleepUntil(ctx, wake)
}

// bytesTime is how long n bytes take at rate bytes per second.
func bytesTime(n, rate int64) time.Duration {
	return time.Duration(float64(n) * float64(time.Second) / float64(rate))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sleepUntil waits until t or until ctx ends, whichever is first.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
