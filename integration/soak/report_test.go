package soak

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// counts are the totals of one side of the traffic (the job, or the
// cluster reaching the job).
type counts struct {
	Requests  int64 `json:"requests"`
	Transfers int64 `json:"transfers"`
	Bytes     int64 `json:"bytes"` // verified bytes of completed transfers
	DNS       int64 `json:"dns"`
	Failures  int64 `json:"failures"`
}

func (c counts) add(o counts) counts {
	return counts{c.Requests + o.Requests, c.Transfers + o.Transfers, c.Bytes + o.Bytes, c.DNS + o.DNS, c.Failures + o.Failures}
}

// Kinds of events; the job prints one JSON event per line on stdout.
const (
	evReady    = "ready"    // the job serves its exposed port
	evStats    = "stats"    // running totals, every sampleEvery
	evTransfer = "transfer" // one completed, byte-exact transfer
	evFail     = "fail"     // one failed operation, with the error
	evFinal    = "final"    // totals once every operation has ended
)

// event is one line of the job's report.
type event struct {
	Kind  string `json:"kind"`
	What  string `json:"what,omitempty"`  // the operation
	Start int64  `json:"start,omitempty"` // unix ns
	End   int64  `json:"end,omitempty"`   // unix ns
	Bytes int64  `json:"bytes,omitempty"`
	Err   string `json:"err,omitempty"`
	// Refused: the connection was refused or reset before any response.
	Refused bool    `json:"refused,omitempty"`
	Counts  *counts `json:"counts,omitempty"`
}

// tally counts one side's operations as they end; emit receives every
// transfer and failure event and must be safe for concurrent use.
type tally struct {
	requests, transfers, bytes, dns, failures atomic.Int64
	emit                                      func(event)
}

func (t *tally) snapshot() counts {
	return counts{t.requests.Load(), t.transfers.Load(), t.bytes.Load(), t.dns.Load(), t.failures.Load()}
}

func (t *tally) fail(what string, start time.Time, err error) {
	t.failures.Add(1)
	t.emit(event{Kind: evFail, What: what, Start: start.UnixNano(), End: time.Now().UnixNano(), Err: err.Error(),
		Refused: refusedAtConnect(err)})
}

func (t *tally) transferred(what string, start time.Time, n int64) {
	t.transfers.Add(1)
	t.bytes.Add(n)
	t.emit(event{Kind: evTransfer, What: what, Start: start.UnixNano(), End: time.Now().UnixNano(), Bytes: n})
}

// recorder keeps the events of the cluster side, which runs in the test.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// parseEvents reads the job's report; other lines (none are expected)
// are skipped.
func parseEvents(stdout string) []event {
	var out []event
	for line := range strings.Lines(stdout) {
		var e event
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind != "" {
			out = append(out, e)
		}
	}
	return out
}

// lastCounts returns the counts of the last event of kind, if any.
func lastCounts(events []event, kind string) (counts, bool) {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == kind && events[i].Counts != nil {
			return *events[i].Counts, true
		}
	}
	return counts{}, false
}

func ofKind(events []event, kind string) []event {
	var out []event
	for _, e := range events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// cutByKills counts the transfers in flight at one of the kills: each
// had its carrier cut and still completed byte-exact.
func cutByKills(transfers []event, kills []time.Time) int {
	n := 0
	for _, e := range transfers {
		for _, k := range kills {
			if ns := k.UnixNano(); e.Start < ns && ns < e.End {
				n++
				break
			}
		}
	}
	return n
}
