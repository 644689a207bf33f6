package soak

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestSoak runs the traffic mix through one sidecar for MESHLAUNCH_SOAK
// while the websocket is cut every killEvery, and checks that no flow
// lost or changed a byte, that every kind of traffic ran, that the kills
// cut websockets and transfers in flight, and that the sidecar's
// goroutines, descriptors and RSS came back within the margins of the
// start figures once the job had gone.
func TestSoak(t *testing.T) {
	d := soakDuration(t)
	c := newCluster(t)
	idle := c.mustScrape(t)
	began := time.Now()
	job := c.startLauncher(t, d)
	side := c.startClusterSide(t, began.Add(d))
	t.Logf("soak for %v: launcher joined through the relay at %s; idle sidecar: %s", d, c.server, idle)
	dr := newDriver(t, c, job, side, began, d)
	dr.run()

	if err := side.wait(drainMax); err != nil {
		t.Fatal(err)
	}
	c.quitJob(t)
	code, err := job.Wait(drainMax)
	if err != nil || code != 0 {
		t.Fatalf("launcher: exit %d, %v\nstdout tail:\n%s\nstderr:\n%s", code, err, tailLines(job.Stdout(), 20), job.Stderr())
	}
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
