package soak

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// jobBase is the job's server as the cluster reaches it: the pod IP on
// the exposed port, through the sidecar's ingress and the tunnel.
const jobBase = "http://" + nstest.PodIP + ":" + nstest.ExposedTCP

// clusterSide is the cluster's half of the traffic: short requests and
// byte-checked downloads from the Service host to the job at the pod IP.
// It owns its workers' goroutines: they end once the deadline has passed
// and their last operations are over, or at once when abort is called.
type clusterSide struct {
	tally
	rec   recorder
	wg    sync.WaitGroup
	abort context.CancelFunc
}

// startClusterSide runs the cluster's workers until the deadline; cleanup
// aborts them and waits, should the test end early.
func (c *cluster) startClusterSide(t *testing.T, deadline time.Time) *clusterSide {
	cs := &clusterSide{}
	cs.emit = cs.rec.add
	stop, cancelStop := context.WithDeadline(context.Background(), deadline)
	abort, cancelAbort := context.WithCancel(context.Background())
	cs.abort = func() { cancelAbort(); cancelStop() }
	ws := []worker{
		{what: "request " + jobBase, kind: opRequest, pause: requestPause, timeout: opTimeout,
			op: requestOp(c.svc, jobBase+"/", nstest.SvcHostIP)},
		{what: "download " + jobBase, kind: opTransfer, timeout: opTimeoutLong,
			op: downloadOp(c.svc, jobBase, ingressBytes)},
	}
	cs.wg.Go(func() { runWorkers(stop, abort, &cs.tally, ws) })
	t.Cleanup(func() { cs.abort(); cs.wg.Wait() })
	return cs
}

// wait waits for the workers, up to timeout.
func (cs *clusterSide) wait(timeout time.Duration) error {
	done := make(chan struct{})
	go func() { cs.wg.Wait(); close(done) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return fmt.Errorf("the cluster side's operations still run %v after the soak", timeout)
	}
}
