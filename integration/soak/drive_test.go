package soak

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// driver runs the soak's clock on the test goroutine: the start sample
// after the warm-up, a sample every sampleEvery, a kill every killEvery
// after the start sample, and a progress line every progressEvery.
type driver struct {
	t     *testing.T
	c     *cluster
	jobs  []*launcher // the main one first
	side  *clusterSide
	began time.Time
	d     time.Duration

	nextSample, nextKill, nextProgress time.Time

	start, peak, last sample
	kills             []time.Time
	resets, restarts  int
}

func newDriver(t *testing.T, c *cluster, jobs []*launcher, side *clusterSide, began time.Time, d time.Duration) *driver {
	return &driver{t: t, c: c, jobs: jobs, side: side, began: began, d: d,
		nextSample: began, nextKill: began.Add(warmUp(d) + killEvery), nextProgress: began.Add(progressEvery)}
}

// run drives the soak until its duration has passed.
func (dr *driver) run() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := dr.began.Add(dr.d)
	for now := time.Now(); now.Before(end); now = <-tick.C {
		dr.step(now)
	}
}

func (dr *driver) step(now time.Time) {
	for _, l := range dr.jobs {
		select {
		case <-l.proc.Done():
			dr.t.Fatalf("%s (%s) exited during the soak\nstdout tail:\n%s\nstderr:\n%s", l.name, l.addr, tailLines(l.proc.Stdout(), 20), l.proc.Stderr())
		default:
		}
	}
	if dr.start.at.IsZero() && now.Sub(dr.began) >= warmUp(dr.d) {
		dr.start = dr.c.mustScrape(dr.t)
		dr.peak = peakOf(dr.peak, dr.start)
		dr.t.Logf("start sample after %v of warm-up: %s", warmUp(dr.d), dr.start)
	}
	if !now.Before(dr.nextSample) {
		dr.last = dr.c.mustScrape(dr.t)
		dr.peak = peakOf(dr.peak, dr.last)
		dr.nextSample = dr.nextSample.Add(sampleEvery)
	}
	if !now.Before(dr.nextKill) {
		dr.kill()
		dr.nextKill = dr.nextKill.Add(killEvery)
	}
	if !now.Before(dr.nextProgress) {
		dr.progress(now)
		dr.nextProgress = dr.nextProgress.Add(progressEvery)
	}
}

// kill cuts every websocket between the launchers and the sidecar,
// alternating a reset at the relay (RST, no FIN) and a restart of nginx.
func (dr *driver) kill() {
	dr.kills = append(dr.kills, time.Now())
	if len(dr.kills)%2 == 1 {
		dr.resets++
		dr.c.resetRelay(dr.t, dr.resets)
		return
	}
	dr.restarts++
	dr.c.restartIngress(dr.t)
}

func (dr *driver) progress(now time.Time) {
	var b strings.Builder
	for _, l := range dr.jobs {
		job, _ := lastCounts(parseEvents(l.proc.Stdout()), evStats)
		fmt.Fprintf(&b, "\n  %s (%s): %s", l.name, l.addr, job)
	}
	dr.t.Logf("soak %v of %v: cluster to job %s; kills %d; sidecar %s%s",
		now.Sub(dr.began).Round(time.Second), dr.d, dr.side.snapshot(), len(dr.kills), dr.last, b.String())
}

// resetRelay has the relay reset every connection (the n-th reset) and
// waits until it has.
func (c *cluster) resetRelay(t *testing.T, n int) {
	t.Helper()
	if err := c.relay.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(c.relay.Stdout(), "relay reset") < n {
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not report reset %d within 10 s:\n%s", n, c.relay.Stdout())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restartIngress stops nginx, which closes every websocket through it,
// and starts it again with the same certificate.
func (c *cluster) restartIngress(t *testing.T) {
	t.Helper()
	if err := c.Ingress.Proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ingress.Proc.Wait(10 * time.Second); err != nil {
		t.Fatalf("nginx did not stop: %v", err)
	}
	c.Ingress = c.Topo.StartIngress(t, nstest.IngressOpts{Certs: c.certs})
}

// mustScrape samples the sidecar's /metrics and fails t if it cannot.
func (c *cluster) mustScrape(t *testing.T) sample {
	t.Helper()
	s, err := c.scrape(t.Context())
	if err != nil {
		t.Fatalf("sample the sidecar: %v", err)
	}
	return s
}

// settle waits until the sidecar has no peer left and its figures are
// within the limits of start, sampling every 2 s for up to settleMax, and
// returns the last sample and how long it took.
func (c *cluster) settle(t *testing.T, start sample) (sample, time.Duration) {
	t.Helper()
	lim := limits(start)
	began := time.Now()
	for {
		s := c.mustScrape(t)
		if (s.peers == 0 && s.within(lim)) || time.Since(began) > settleMax {
			return s, time.Since(began).Round(time.Second)
		}
		time.Sleep(2 * time.Second)
	}
}

func tailLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
