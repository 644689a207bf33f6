package nsload

import (
	"strconv"
	"testing"
	"time"
)

// TestParallelStreams (row "4 and 50 parallel iperf3 streams through the
// mesh"): the job, run by "meshlaunch run" as nobody, sends 4 streams of
// 32 MiB, then 50 streams of 4 MiB, at once to an echo server on the
// Service IP, and compares every byte that comes back with what it sent
// (iperf3 checks no data, so this is the package's own keyed stream).
// No stream may fail or differ; the throughput is logged, not asserted
// (make bench measures it).
func TestParallelStreams(t *testing.T) {
	c := newCluster(t)
	job := c.startJobWorker(t)
	for _, tc := range []struct {
		streams int
		size    int
	}{{4, 32 << 20}, {50, 4 << 20}} {
		t.Run(strconv.Itoa(tc.streams), func(t *testing.T) {
			group := "streams" + strconv.Itoa(tc.streams)
			n := strconv.Itoa(tc.streams)
			if rep := job.do(t, time.Minute, "open", group, sumAddr, n, n, "E", strconv.Itoa(tc.size), "10s"); rep.OK != tc.streams {
				t.Fatalf("%d of %d streams opened: %v", rep.OK, tc.streams, rep)
			}
			rep := job.do(t, 3*time.Minute, "transfer", group, "150s")
			t.Logf("%v; %.0f Mbit/s each way", rep, float64(rep.Bytes)*8/rep.ElapsedMS/1000)
			if rep.OK != tc.streams || rep.Bytes != int64(tc.streams*tc.size) {
				t.Errorf("%d of %d streams came back byte-exact (%d bytes): %v", rep.OK, tc.streams, rep.Bytes, rep)
			}
		})
	}
}
