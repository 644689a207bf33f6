package wsproxy

import (
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/ratelimiter"
)

// TestSessionsHaveDistinctRateLimitAddresses: wireguard-go's handshake
// rate limiter keys on Endpoint.DstIP; two live sessions (of two peers)
// get different addresses, so exhausting one session's budget leaves the
// other's untouched.
func TestSessionsHaveDistinctRateLimitAddresses(t *testing.T) {
	srv, hs := newTestServer(t, ServerConfig{Auth: twoPeers(), Keepalive: fastKeepalive})
	rt := newRouter(t, srv)
	url := wsURL(t, hs).String()
	startWitness(t, dialPeer(t, url, witnessCred))
	startWitness(t, dialPeer(t, url, testCred))
	eventually(t, 5*time.Second, "datagrams of both sessions", func() bool {
		return rt.endpoint("peer-a") != nil && rt.endpoint("witness") != nil
	})
	ipA, ipW := rt.endpoint("peer-a").DstIP(), rt.endpoint("witness").DstIP()
	if !ipA.IsValid() || ipA == ipW {
		t.Fatalf("session addresses %v and %v: the rate limiter would share one budget", ipA, ipW)
	}
	var rl ratelimiter.Ratelimiter
	rl.Init()
	defer rl.Close()
	// Positive control: the limiter does limit one address.
	limited := false
	for range 100 {
		if !rl.Allow(ipA) {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatalf("100 handshakes from %v in a burst were all allowed", ipA)
	}
	if !rl.Allow(ipW) {
		t.Fatalf("the other session (%v) was limited by the first's flood", ipW)
	}
}
