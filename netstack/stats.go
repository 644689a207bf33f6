package netstack

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Refusal reasons counted in Stats.Denied besides policy reasons.
const (
	reasonPolicy          = "policy"
	reasonLimitInFlight   = "limit_inflight"
	reasonLimitFlows      = "limit_flows"
	reasonDialRefused     = "dial_refused"
	reasonDialTimeout     = "dial_timeout"
	reasonDialError       = "dial_error"
	reasonICMPUnavailable = "icmp_unavailable"
)

// Stats is a snapshot of the forwarders' counters. All are monotonic except
// the gauges TCPActive, UDPActive and InFlight.
type Stats struct {
	TCPActive int // gauge: spliced TCP flows
	UDPActive int // gauge: live UDP sessions
	InFlight  int // gauge: dials (and echo relays) in progress

	TCPAccepted       uint64 // TCP flows dialled and handshaken
	UDPAccepted       uint64 // UDP sessions dialled
	ICMPEchoForwarded uint64 // echo requests sent outside

	// Denied counts refused flows by reason: "policy" or a Denied.Reason,
	// "limit_inflight", "limit_flows", "dial_refused", "dial_timeout",
	// "dial_error" and "icmp_unavailable". A UDP or ICMP flow is counted per
	// dropped packet.
	Denied map[string]uint64

	BytesIn  uint64 // payload bytes tunnel -> outside of forwarded flows
	BytesOut uint64 // payload bytes outside -> tunnel of forwarded flows
}

// counters are the live values behind Stats.
type counters struct {
	tcpActive, udpActive                  atomic.Int64
	tcpAccepted, udpAccepted, echoForward atomic.Uint64
	bytesIn, bytesOut                     atomic.Uint64

	mu     sync.Mutex
	denied map[string]uint64 // guarded by mu
}

// deny counts one refusal.
func (c *counters) deny(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.denied == nil {
		c.denied = make(map[string]uint64)
	}
	c.denied[reason]++
}

// Stats returns a snapshot of the counters. It is safe for concurrent use and
// valid before Forward and after Close.
func (s *Stack) Stats() Stats {
	c := &s.stats
	st := Stats{
		TCPActive:         int(c.tcpActive.Load()),
		UDPActive:         int(c.udpActive.Load()),
		TCPAccepted:       c.tcpAccepted.Load(),
		UDPAccepted:       c.udpAccepted.Load(),
		ICMPEchoForwarded: c.echoForward.Load(),
		BytesIn:           c.bytesIn.Load(),
		BytesOut:          c.bytesOut.Load(),
	}
	if f := s.fwd.Load(); f != nil {
		st.InFlight = f.inFlight.used()
	}
	c.mu.Lock()
	st.Denied = maps.Clone(c.denied)
	c.mu.Unlock()
	if st.Denied == nil {
		st.Denied = map[string]uint64{}
	}
	return st
}
