package tunnel

import "sync/atomic"

// Stats are counters of a Server since it started.
type Stats struct {
	Active       int    // live tunnel websockets (gauge)
	OpenStreams  int    // TCP streams carrying data now (gauge): what a drain waits for
	Streams      uint64 // TCP streams opened (forward and reverse)
	UDPSessions  uint64 // UDP sessions opened
	Reverse      uint64 // reverse control websockets accepted
	Denied       uint64 // destinations refused by the policy (403)
	DialFailures uint64 // destinations unreachable, refused or timed out
	AuthFailures uint64 // requests with a missing or wrong credential
	Rejected     uint64 // websockets refused by MaxConns
	BytesUp      uint64 // stream bytes client to destination, closed streams
	BytesDown    uint64 // stream bytes destination to client, closed streams
}

type counters struct {
	streams, udp, reverse, denied, dialFails, authFailures, rejected atomic.Uint64
	bytesUp, bytesDown                                               atomic.Uint64
	open                                                             atomic.Int64
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.counters
	return Stats{
		Active:       len(s.slots),
		OpenStreams:  int(c.open.Load()),
		Streams:      c.streams.Load(),
		UDPSessions:  c.udp.Load(),
		Reverse:      c.reverse.Load(),
		Denied:       c.denied.Load(),
		DialFailures: c.dialFails.Load(),
		AuthFailures: c.authFailures.Load(),
		Rejected:     c.rejected.Load(),
		BytesUp:      c.bytesUp.Load(),
		BytesDown:    c.bytesDown.Load(),
	}
}
