package wgdev

import (
	"log/slog"
	"sync/atomic"
	"testing"
)

// TestLoggerCountsDisallowedSources: the verbose messages wireguard-go
// emits for a packet whose source is outside the peer's AllowedIPs are
// counted, with or without a logger; other messages are not.
func TestLoggerCountsDisallowedSources(t *testing.T) {
	for _, l := range []*slog.Logger{nil, slog.New(slog.DiscardHandler)} {
		var n atomic.Uint64
		log := newLogger(l, &n)
		log.Verbosef("%v - Receiving keepalive packet", "peer(x)") // control: not counted
		log.Verbosef(disallowedSrc4, "peer(x)")
		log.Verbosef(disallowedSrc6, "peer(x)")
		log.Errorf("Failed to write packets to TUN device: %v", "x")
		if n.Load() != 2 {
			t.Fatalf("counted %d packets with a disallowed source, want 2", n.Load())
		}
	}
}
