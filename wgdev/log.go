package wgdev

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/device"
)

// errorBurst is how many error lines pass per errorWindow; wireguard-go
// logs some errors per packet, which must not flood the log.
const (
	errorBurst  = 10
	errorWindow = 10 * time.Second
)

// wireguard-go reports a decrypted packet whose inner source address is
// not in the sending peer's AllowedIPs (a spoofed source) only with these
// verbose messages; newLogger counts them.
const (
	disallowedSrc4 = "IPv4 packet with disallowed source address from %v"
	disallowedSrc6 = "IPv6 packet with disallowed source address from %v"
)

// newLogger adapts l for wireguard-go and counts dropped packets with a
// disallowed source address in spoofed, with or without l.
func newLogger(l *slog.Logger, spoofed *atomic.Uint64) *device.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	l = l.With("component", "wireguard")
	rl := &limiter{}
	return &device.Logger{
		Verbosef: func(format string, args ...any) {
			if format == disallowedSrc4 || format == disallowedSrc6 {
				spoofed.Add(1)
			}
			if l.Enabled(context.Background(), slog.LevelDebug) {
				l.Debug(fmt.Sprintf(format, args...))
			}
		},
		Errorf: func(format string, args ...any) {
			if ok, dropped := rl.allow(time.Now()); ok {
				msg := fmt.Sprintf(format, args...)
				if dropped > 0 {
					l.Warn(msg, "suppressed", dropped)
				} else {
					l.Warn(msg)
				}
			}
		},
	}
}

// limiter passes errorBurst events per errorWindow and counts the rest.
type limiter struct {
	mu      sync.Mutex
	start   time.Time
	n       int
	dropped int
}

func (r *limiter) allow(now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.start) >= errorWindow {
		r.start, r.n = now, 0
	}
	if r.n >= errorBurst {
		r.dropped++
		return false, 0
	}
	r.n++
	d := r.dropped
	r.dropped = 0
	return true, d
}
