package faultrelay

import "time"

// OutageMode says what happens to connections made during an outage.
type OutageMode int

const (
	// BlackholeNew accepts new connections and then blackholes them, like
	// a load balancer whose backend is unreachable: the TCP handshake
	// completes (the listener stays open) but nothing ever answers.
	BlackholeNew OutageMode = iota + 1
	// RefuseNew accepts new connections and resets them at once, like a
	// middlebox with no backend to send them to.
	RefuseNew
)

// outage is the state of the current or last outage.
type outage struct {
	until time.Time
	mode  OutageMode
}

func (o outage) active(now time.Time) bool { return now.Before(o.until) }

// Outage takes the carrier down for d: every current connection is
// blackholed for good (as Blackhole), and connections made before d has
// passed are blackholed too or reset, as mode says; connections made
// after that are relayed normally. It returns at once with the time the
// carrier comes back.
func (r *Relay) Outage(d time.Duration, mode OutageMode) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := time.Now().Add(d)
	r.outage = outage{until: end, mode: mode}
	for p := range r.conns {
		p.silent.Store(true)
	}
	return end
}
