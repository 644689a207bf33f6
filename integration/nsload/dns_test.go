package nsload

import (
	"strconv"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/meshapi"
)

// Figures of TestDNSStormBounded.
const (
	dnsQueryCount = 10000
	dnsConc       = 64 // queries in flight at once
	dnsTries      = 10 // an unanswered query is asked again, from a new port
	dnsTryTimeout = 500 * time.Millisecond
	// udpCap is the sidecar's --max-flows-per-peer: at the storm's rate
	// (about 5,000 queries a second here) it is reached well within
	// udpIdle, so the cap bites.
	udpCap  = 1024
	udpIdle = time.Second // the sidecar's --udp-idle-timeout
	// fdSlack covers the sidecar's descriptors besides the storm's:
	// metrics scrapes, the websocket, listeners, epoll.
	fdSlack = 32
)

// TestDNSStormBounded (row "10k DNS queries, each from a new source
// port"): the job asks for the Service's name 10,000 times, 64 at once,
// each query from a new UDP socket on its own source port, and checks
// every answer (the Service IP); the sidecar's open descriptors are
// sampled every 100 ms meanwhile.
//
//   - Through the in-tunnel DNS (169.254.64.1): every query is answered
//     (and counted as answered in /metrics) and the sidecar's descriptors stay within one upstream socket per
//     query in flight (2×64 above the baseline), however many queries.
//   - Straight to the cluster's resolver (the Service IP, port 53), each
//     query an egress UDP session of its own: with --max-flows-per-peer
//     1024 and --udp-idle-timeout 1s, the sessions reach the cap and stop
//     there (limit_flows counts the datagrams dropped; their queries are
//     asked again), the descriptors stay within the cap, every query is
//     answered in the end, and after the idle timeout the sessions are
//     reaped: meshlaunch_flows{proto="udp"} back to 0, descriptors and
//     goroutines back to their baseline.
func TestDNSStormBounded(t *testing.T) {
	c := newCluster(t, "--udp-idle-timeout", udpIdle.String(), "--max-flows-per-peer", strconv.Itoa(udpCap))
	job := c.startJobWorker(t)
	base := c.metrics(t)
	t.Logf("baseline: %s", pick(base, openFDs, goroutines, udpSessions))
	storm := func(t *testing.T, server string) (report, map[string]float64) {
		t.Helper()
		s := c.startSampler(t, 100*time.Millisecond, udpSessions)
		rep := job.do(t, 3*time.Minute, "dns", server, nstest.WebName+".", nstest.ServiceIP,
			strconv.Itoa(dnsQueryCount), strconv.Itoa(dnsConc), strconv.Itoa(dnsTries), dnsTryTimeout.String())
		peaks, n := s.stop()
		t.Logf("%s: %v; %.0f queries/s; peaks over %d samples: %s", server, rep, float64(rep.OK)/rep.ElapsedMS*1000, n,
			pick(peaks, peakFDs, udpSessions, peakRSS))
		if rep.OK != dnsQueryCount {
			t.Errorf("%s: %d of %d queries answered with %s: %v", server, rep.OK, dnsQueryCount, nstest.ServiceIP, rep)
		}
		return rep, peaks
	}

	t.Run("in-tunnel DNS", func(t *testing.T) {
		before := c.metrics(t)
		_, peaks := storm(t, meshapi.DefaultServiceAddr.String()+":53")
		d := deltas(before, c.metrics(t))
		t.Logf("counted: %s", pick(d, dnsQueries("answered"), dnsQueries("dropped"), dnsQueries("failed")))
		if d[dnsQueries("answered")] < dnsQueryCount {
			t.Errorf("the in-tunnel DNS counted %g answers, want at least %d", d[dnsQueries("answered")], dnsQueryCount)
		}
		if limit := base[openFDs] + 2*dnsConc; peaks[peakFDs] > limit {
			t.Errorf("the sidecar held %.0f descriptors, over %g (baseline + 2 per query in flight)", peaks[peakFDs], limit)
		}
	})
	t.Run("cluster resolver through the mesh", func(t *testing.T) {
		before := c.metrics(t)
		rep, peaks := storm(t, nstest.ServiceIP+":53")
		after := c.metrics(t)
		dropped := after[denied("limit_flows")] - before[denied("limit_flows")]
		t.Logf("at the end: %s; limit_flows +%g", pick(after, udpSessions, openFDs, goroutines), dropped)
		if peaks[udpSessions] > udpCap {
			t.Errorf("%g UDP sessions at once, over the cap of %d", peaks[udpSessions], udpCap)
		}
		if dropped == 0 || rep.Retries == 0 {
			t.Errorf("the storm never reached the cap of %d sessions (limit_flows +%g, %d queries asked again): "+
				"at %.0f queries/s it opens fewer than %d sessions per idle timeout %v",
				udpCap, dropped, rep.Retries, float64(rep.OK)/rep.ElapsedMS*1000, udpCap, udpIdle)
		}
		if limit := base[openFDs] + udpCap + fdSlack; peaks[peakFDs] > limit {
			t.Errorf("the sidecar held %.0f descriptors, over %g (baseline + the session cap + %d)", peaks[peakFDs], limit, fdSlack)
		}
		start := time.Now()
		reaped := c.waitMetrics(t, udpIdle+15*time.Second, func(m map[string]float64) bool {
			return m[udpSessions] == 0 && m[openFDs] <= base[openFDs] && m[goroutines] <= base[goroutines]+goroutineSlack
		}, udpSessions, openFDs, goroutines)
		t.Logf("reaped %v later: %s", time.Since(start).Round(time.Millisecond), pick(reaped, udpSessions, openFDs, goroutines))
	})
}
