package tunnel

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// backoff spaces reconnects as wsproxy does: exponential from Initial to
// Max, each delay a uniform draw from [d/2, d] so many clients restarting
// together spread out. Not safe for concurrent use.
type backoff struct {
	cfg      wsproxy.Backoff
	attempts int
}

func newBackoff(b wsproxy.Backoff) *backoff {
	b.Initial = orDefault(b.Initial, 250*time.Millisecond)
	b.Max = max(orDefault(b.Max, 30*time.Second), b.Initial)
	b.StableAfter = orDefault(b.StableAfter, 30*time.Second)
	return &backoff{cfg: b}
}

func (b *backoff) next() time.Duration {
	d := b.cfg.Initial
	for i := 0; i < b.attempts && d < b.cfg.Max; i++ {
		d *= 2
	}
	d = min(d, b.cfg.Max)
	b.attempts++
	half := d / 2
	return half + rand.N(d-half+1)
}

// connected resets the delays if the connection that just ended had stayed
// up for StableAfter.
func (b *backoff) connected(up time.Duration) {
	if up >= b.cfg.StableAfter {
		b.attempts = 0
	}
}

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
