package netstack

import (
	"net/netip"
	"sync"
)

// quota caps a count globally and per source address. Its methods are safe
// for concurrent use.
type quota struct {
	max, perSource int

	mu       sync.Mutex
	total    int
	bySource map[netip.Addr]int
}

func newQuota(max, perSource int) *quota {
	return &quota{max: max, perSource: perSource, bySource: make(map[netip.Addr]int)}
}

// acquire takes one unit for src; it reports false if a cap is reached.
func (q *quota) acquire(src netip.Addr) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.total >= q.max || q.bySource[src] >= q.perSource {
		return false
	}
	q.total++
	q.bySource[src]++
	return true
}

// release returns a unit taken by acquire.
func (q *quota) release(src netip.Addr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.total--
	if n := q.bySource[src] - 1; n > 0 {
		q.bySource[src] = n
	} else {
		delete(q.bySource, src)
	}
}

// used is the number of units held.
func (q *quota) used() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total
}

// ticket holds the units a flow took: a dial slot until the dial ends and a
// flow slot until the flow ends. It is used by one goroutine at a time.
type ticket struct {
	f       *forwarder
	src     netip.Addr
	dialing bool // holds an in-flight unit
	flow    bool // holds a flow unit
}

// dialDone returns the in-flight unit.
func (t *ticket) dialDone() {
	if t.dialing {
		t.dialing = false
		t.f.inFlight.release(t.src)
	}
}

// release returns every unit still held.
func (t *ticket) release() {
	t.dialDone()
	if t.flow {
		t.flow = false
		t.f.flows.release(t.src)
	}
}
