package soak

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestSoak runs the traffic mix through one sidecar with several
// launchers (one explicit peer each) for MESHLAUNCH_SOAK while every
// websocket is cut every killEvery, and checks that no flow of any
// launcher lost or changed a byte, that every kind of traffic ran in
// every launcher, that the kills cut every launcher's websocket and
// transfers in flight, and that the sidecar's goroutines, descriptors and
// RSS came back within the margins of the start figures, with no peer
// connected, once the jobs had gone.
func TestSoak(t *testing.T) {
	d := soakDuration(t)
	c := newCluster(t)
	idle := c.mustScrape(t)
	began := time.Now()
	jobs := c.startLaunchers(t, d)
	side := c.startClusterSide(t, began.Add(d))
	t.Logf("soak for %v: %d launchers joined through the relay at %s; idle sidecar: %s", d, len(jobs), c.server, idle)
	dr := newDriver(t, c, jobs, side, began, d)
	dr.run()

	if err := side.wait(drainMax); err != nil {
		t.Fatal(err)
	}
	c.quitJob(t)
	waitLaunchers(t, jobs)
	end, settled := c.settle(t, dr.start)
	o := newOutcome(dr, idle, end, settled)
	t.Log("\n" + o.table())
	t.Logf("sidecar flow series at the end:\n%s", c.flowSeries(t.Context()))
	o.check(t)
}

// quitJob asks the job, from the cluster, to end; it fails t unless the
// job answers.
func (c *cluster) quitJob(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	resp, err := get(ctx, c.svc, jobBase+"/quit")
	if err != nil {
		t.Fatalf("ask the job to end: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// waitLaunchers waits for every launcher to exit 0: an extra job ends
// after its last operation, the main one after /quit. drainMax bounds
// the wait of each; the extra ones have been draining all along.
func waitLaunchers(t *testing.T, jobs []*launcher) {
	t.Helper()
	for _, l := range jobs {
		code, err := l.proc.Wait(drainMax)
		if err != nil || code != 0 {
			t.Fatalf("%s (%s): exit %d, %v\nstdout tail:\n%s\nstderr:\n%s", l.name, l.addr, code, err,
				tailLines(l.proc.Stdout(), 20), l.proc.Stderr())
		}
	}
}
