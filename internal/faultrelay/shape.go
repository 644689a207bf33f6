package faultrelay

import (
	"sync/atomic"
	"time"
)

// Direction is one way through the relay.
type Direction int

const (
	// Up is from the client (who connects to the relay) to the target.
	Up Direction = iota
	// Down is from the target to the client.
	Down
)

func (d Direction) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// Shape degrades one direction of every connection through the relay.
// The zero value relays as fast as the sockets allow.
type Shape struct {
	// Latency is added to every chunk: it is written Latency after it
	// was read (and after the throttle let it through). Chunks stay in
	// order and several are in flight at once, so throughput is not
	// limited to one chunk per Latency.
	Latency time.Duration
	// Rate, in bytes per second, throttles the direction with a token
	// bucket shared by every connection, like one link: 1 Mbit/s is
	// 125000. The bucket holds at most 20 ms of tokens (at least 1 KiB).
	// 0 is unlimited.
	Rate int64
	// Slice, if positive, cuts every write into pieces of at most Slice
	// bytes, each its own write on a socket without Nagle's delay, so
	// the receiver sees messages split across TCP segments.
	Slice int
}

// Stats counts what the relay wrote in one direction.
type Stats struct {
	Bytes  int64 // bytes handed to writes to the receiving side
	Writes int64 // write calls that carried them (a failed one included)
}

// link is one direction's state shared by every connection.
type link struct {
	shape  atomic.Pointer[Shape]
	bucket bucket
	bytes  atomic.Int64
	writes atomic.Int64
}

// SetShape applies s to direction dir of every connection, current and
// future, from the next chunk read on.
func (r *Relay) SetShape(dir Direction, s Shape) {
	r.link[dir].shape.Store(&s)
}

// Stats returns what the relay has written in direction dir so far.
func (r *Relay) Stats(dir Direction) Stats {
	l := &r.link[dir]
	return Stats{Bytes: l.bytes.Load(), Writes: l.writes.Load()}
}
