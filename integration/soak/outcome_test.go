package soak

import (
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// outcome is what the soak measured.
type outcome struct {
	d                      time.Duration
	idle, start, peak, end sample
	settled                time.Duration
	jobs                   []jobResult // one per launcher, the main one first
	job, cluster           counts      // job: every launcher's together
	failures               []event     // every failure but refused
	refused                []event     // new connections refused during a reconnect
	transfers              int         // transfers with start and end times, both sides
	cut                    int         // of those, in flight at a kill
	kills                  int
	resets, restarts       int
}

// jobResult is what one launcher's job reported.
type jobResult struct {
	name, addr string
	counts     counts
	final      bool // the job reported its totals after its last operation
	reconnects int  // "websocket lost" in the launcher's log
}

func newOutcome(dr *driver, idle, end sample, settled time.Duration) *outcome {
	o := &outcome{
		d: dr.d, idle: idle, start: dr.start, peak: peakOf(dr.peak, end), end: end, settled: settled,
		cluster: dr.side.snapshot(), kills: len(dr.kills), resets: dr.resets, restarts: dr.restarts,
	}
	events := dr.side.rec.all()
	for _, l := range dr.jobs {
		evs := parseEvents(l.proc.Stdout())
		r := jobResult{name: l.name, addr: l.addr, reconnects: strings.Count(l.proc.Stderr(), "websocket lost; reconnecting")}
		r.counts, r.final = lastCounts(evs, evFinal)
		o.jobs = append(o.jobs, r)
		o.job = o.job.add(r.counts)
		for _, e := range evs {
			e.What = l.name + ": " + e.What // a failure says whose it was
			events = append(events, e)
		}
	}
	transfers := ofKind(events, evTransfer)
	o.transfers, o.cut = len(transfers), cutByKills(transfers, dr.kills)
	o.failures, o.refused = splitFailures(ofKind(events, evFail), dr.kills)
	return o
}

// splitFailures sets apart the new connections the sidecar refused at
// once while the websocket was being re-established (reconnectWindow
// after a kill): its ingress resets a client when no job is connected
// (sidecar/ingress.go, reachable). No byte of those flows was sent, so
// none was lost; they are reported, not failed. Everything else fails.
func splitFailures(fails []event, kills []time.Time) (failures, refused []event) {
	for _, e := range fails {
		if e.Refused && duringReconnect(time.Unix(0, e.End), kills) {
			refused = append(refused, e)
		} else {
			failures = append(failures, e)
		}
	}
	return failures, refused
}

func duringReconnect(at time.Time, kills []time.Time) bool {
	for _, k := range kills {
		if !at.Before(k) && at.Sub(k) <= reconnectWindow {
			return true
		}
	}
	return false
}

// table is the report: the sidecar's figures, then the traffic.
func (o *outcome) table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	lim := limits(o.start)
	fmt.Fprintf(w, "sidecar\tidle\tstart\tpeak\tend\tend limit\t\n")
	fmt.Fprintf(w, "goroutines\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", o.idle.goroutines, o.start.goroutines, o.peak.goroutines, o.end.goroutines, lim.goroutines)
	fmt.Fprintf(w, "open fds\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", o.idle.fds, o.start.fds, o.peak.fds, o.end.fds, lim.fds)
	fmt.Fprintf(w, "RSS MiB\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", o.idle.rss/(1<<20), o.start.rss/(1<<20), o.peak.rss/(1<<20), o.end.rss/(1<<20), lim.rss/(1<<20))
	fmt.Fprintf(w, "Go heap in use MiB\t%.1f\t%.1f\t%.1f\t%.1f\t-\t\n", o.idle.heap/(1<<20), o.start.heap/(1<<20), o.peak.heap/(1<<20), o.end.heap/(1<<20))
	w.Flush()
	total := o.job.add(o.cluster)
	fmt.Fprintf(&b, "duration %v; end sampled %v after the launchers left\n", o.d, o.settled)
	for _, j := range o.jobs {
		fmt.Fprintf(&b, "%s (%s) job: %s; reconnects logged %d\n", j.name, j.addr, j.counts, j.reconnects)
	}
	fmt.Fprintf(&b, "all %d jobs:     %s\n", len(o.jobs), o.job)
	fmt.Fprintf(&b, "cluster to job: %s\n", o.cluster)
	fmt.Fprintf(&b, "total:          %s\n", total)
	fmt.Fprintf(&b, "new connections refused during a reconnect (not failed): %d\n", len(o.refused))
	fmt.Fprintf(&b, "kills %d (relay resets %d, nginx restarts %d); websocket sessions %.0f; transfers in flight at a kill %d of %d\n",
		o.kills, o.resets, o.restarts, o.end.sessions, o.cut, o.transfers)
	return b.String()
}

func (c counts) String() string {
	return fmt.Sprintf("requests %d, transfers %d (%s), DNS queries %d, failures %d",
		c.Requests, c.Transfers, mib(float64(c.Bytes)), c.DNS, c.Failures)
}

// check fails t on lost data, on a soak that did not do what it claims,
// and on figures that did not come back.
func (o *outcome) check(t *testing.T) {
	t.Helper()
	o.checkFlows(t)
	o.checkCoverage(t)
	o.checkFigures(t)
}

// checkFlows: no flow lost or changed a byte, nor failed in any other way.
func (o *outcome) checkFlows(t *testing.T) {
	t.Helper()
	for _, j := range o.jobs {
		if !j.final {
			t.Errorf("%s's job never reported its totals: it did not finish its operations", j.name)
		}
	}
	if len(o.failures) > 0 {
		t.Errorf("%d operations failed (job and cluster side, besides %d refused during a reconnect):", len(o.failures), len(o.refused))
		for i, e := range o.failures {
			if i == 20 {
				t.Errorf("  … and %d more", len(o.failures)-i)
				break
			}
			t.Errorf("  %s at %s after %v: %s", e.What, time.Unix(0, e.Start).Format("15:04:05.000"),
				time.Duration(e.End-e.Start).Round(time.Millisecond), e.Err)
		}
	}
}

// checkCoverage: every kind of traffic ran in every launcher, and the
// kills cut every launcher's websocket and transfers in flight (else "no
// data lost" would prove nothing).
func (o *outcome) checkCoverage(t *testing.T) {
	t.Helper()
	for what, n := range map[string]int64{
		"cluster requests to the job": o.cluster.Requests, "cluster transfers from the job": o.cluster.Transfers,
	} {
		if n == 0 {
			t.Errorf("no %s completed", what)
		}
	}
	for _, j := range o.jobs {
		for what, n := range map[string]int64{"requests": j.counts.Requests, "transfers": j.counts.Transfers, "DNS queries": j.counts.DNS} {
			if n == 0 {
				t.Errorf("%s's job completed no %s", j.name, what)
			}
		}
		if j.reconnects < o.kills {
			t.Errorf("%s logged %d reconnects, want at least one per kill (%d): a kill missed its websocket", j.name, j.reconnects, o.kills)
		}
	}
	if o.kills == 0 {
		t.Errorf("no kill during the soak")
	}
	if want := len(o.jobs) * (1 + o.kills); o.end.sessions < float64(want) {
		t.Errorf("the sidecar accepted %.0f websocket sessions, want at least %d (one per launcher, then one per launcher per kill): the kills did not cut every websocket",
			o.end.sessions, want)
	}
	if o.cut == 0 {
		t.Errorf("no transfer was in flight at any of the %d kills", o.kills)
	}
}

// checkFigures: the sidecar's goroutines, descriptors and RSS came back
// within the margins of the start figures.
func (o *outcome) checkFigures(t *testing.T) {
	t.Helper()
	lim := limits(o.start)
	if o.end.goroutines > lim.goroutines {
		t.Errorf("sidecar goroutines: %.0f at the end, %.0f at the start: more than %d left over", o.end.goroutines, o.start.goroutines, goroutineMargin)
	}
	if o.end.fds > lim.fds {
		t.Errorf("sidecar open fds: %.0f at the end, %.0f at the start: more than %d left over", o.end.fds, o.start.fds, fdMargin)
	}
	if o.end.rss > lim.rss {
		t.Errorf("sidecar RSS: %s at the end, %s at the start: above %.1f× + %s", mib(o.end.rss), mib(o.start.rss), rssFactor, mib(rssSlack))
	}
	if o.end.peers != 0 {
		t.Errorf("the sidecar still counts %.0f connected peers after the %d launchers left", o.end.peers, len(o.jobs))
	}
}
