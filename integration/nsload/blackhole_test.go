package nsload

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// Figures of TestBlackholeStormSparesOtherPeer.
const (
	// blackholeAddr drops every SYN (blackhole): the Service host
	// silently drops TCP to port 81.
	blackholeAddr = nstest.ServiceIP + ":81"
	stormWorkers  = 64                     // peer A's dialers, each dialling the blackhole again and again
	stormPause    = 100 * time.Millisecond // on average, jittered so that the dialers do not move in step
	perPeerDials  = 32                     // the sidecar's --max-dials-per-peer
	stormTimeout  = 4 * time.Second        // the sidecar's --dial-timeout
	peerBFlows    = 24                     // peer B's echo flows during the storm, all at once: below its own cap
	peerBFlowLen  = 64 << 10
)

// TestBlackholeStormSparesOtherPeer (row "dial storm to a blackhole from
// one peer while another peer works"): a sidecar serves two explicit
// peers, A and B (in-process job peers, see joinPeer), with
// --max-dials-per-peer 32 and --dial-timeout 4s. A's 64 dialers dial a
// blackhole (SYNs dropped by nftables on the Service host) again and
// again: 32 dials hold A's in-flight slots until the dial timeout, and
// the SYNs of the rest are dropped (counted as limit_inflight) for A's
// TCP to send again, as when a listen queue overflows. While A's slots
// are full, A's own flow to a working server is held back the same way
// (neither refused nor through: the storm does saturate A), but B's 24
// echo flows to that server, dialled at once, all complete byte-exact:
// the cap is per peer. The storm goes on until A's first 32 hanging
// dials have got their RST at the dial timeout; no storm dial ever
// connects and every one that ends, ends with a RST. Once A stops, the
// in-flight gauge goes back to 0 within the dial timeout, and a new flow
// from A works again.
func TestBlackholeStormSparesOtherPeer(t *testing.T) {
	c := newPeersCluster(t)
	a, b := newPeer(t, "10.244.9.1"), newPeer(t, "10.244.9.2")
	flags, sk := c.explicitPeers(t, a, b)
	c.startSidecar(t, append(flags, "--max-dials-per-peer", strconv.Itoa(perPeerDials), "--dial-timeout", stormTimeout.String())...)
	dropSYNs(t, c, "81")
	jobA, jobB := c.joinPeer(t, a, sk), c.joinPeer(t, b, sk)
	dialA, dialB := jobA.Stack.DialContext, jobB.Stack.DialContext
	if rep := roundTrips(dialA, sumAddr, 1, peerBFlowLen, 10*time.Second); rep.OK != 1 {
		t.Fatalf("positive control: peer A's flow before the storm: %v", rep)
	}
	before := c.metrics(t)

	storm := startStorm(t, dialA)
	c.waitMetrics(t, 10*time.Second, func(m map[string]float64) bool { return m[tcpDialing] == perPeerDials }, tcpDialing)
	repA := try(dialA, sumAddr, 1, 1500*time.Millisecond)
	repB := roundTrips(dialB, sumAddr, peerBFlows, peerBFlowLen, 10*time.Second)
	droppedDuring := c.metrics(t)[denied("limit_inflight")] - before[denied("limit_inflight")]
	t.Logf("during the storm: peer A's flow to the server: %v", repA)
	t.Logf("peer B's flows: %v; by then %g of A's SYNs had been dropped over its cap", repB, droppedDuring)
	if repA.OK != 0 || repA.Outcomes["refused"] != 0 {
		t.Errorf("peer A's flow while its slots are full: %v, want it held back (SYN dropped for a retry), neither through nor refused", repA.Outcomes)
	}
	if repB.OK != peerBFlows {
		t.Errorf("peer B: %d of %d flows completed byte-exact during A's storm: %v", repB.OK, peerBFlows, repB)
	}
	if droppedDuring == 0 {
		t.Errorf("no SYN of A was dropped over its cap before peer B's flows ended: the storm did not saturate A")
	}

	if !waitFor(2*stormTimeout+10*time.Second, func() bool { return storm.timedOut.Load() >= perPeerDials }) {
		t.Errorf("%d of the storm's first %d hanging dials ended by the dial timeout", storm.timedOut.Load(), perPeerDials)
	}
	stopped := time.Now()
	stormRep := storm.stop()
	slots := c.waitMetrics(t, stormTimeout+10*time.Second, func(m map[string]float64) bool { return m[tcpDialing] == 0 }, tcpDialing)
	back := time.Since(stopped)
	d := deltas(before, slots)
	t.Logf("storm: %v; %d dials refused at the dial timeout", stormRep, storm.timedOut.Load())
	t.Logf("in-flight slots back %v after the storm stopped (dial timeout %v); counted %s", back.Round(time.Millisecond), stormTimeout,
		pick(d, denied("limit_inflight"), denied("dial_timeout"), denied("limit_flows")))
	if stormRep.OK != 0 || stormRep.Outcomes["refused"] != stormRep.Failed {
		t.Errorf("storm dials: %v; want none connected and every one that ended refused with a RST", stormRep.Outcomes)
	}
	if d[denied("dial_timeout")] < perPeerDials || d[denied("limit_inflight")] < 1 {
		t.Errorf("counted %s; want dial_timeout at least %d and limit_inflight above 0",
			pick(d, denied("dial_timeout"), denied("limit_inflight")), perPeerDials)
	}
	if rep := roundTrips(dialA, sumAddr, 1, peerBFlowLen, 10*time.Second); rep.OK != 1 {
		t.Errorf("peer A's flow after the dial timeout: %v; want it to work (its slots back)", rep)
	}
}

// storm is peer A's dialers, each dialling the blackhole again and
// again until stop.
type storm struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	start    time.Time
	tally    *tally
	timedOut atomic.Int64 // dials refused after half the dial timeout or more
}

func startStorm(t *testing.T, dial dialFunc) *storm {
	ctx, cancel := context.WithCancel(context.Background())
	s := &storm{cancel: cancel, start: time.Now(), tally: newTally("storm")}
	t.Cleanup(func() { s.stop() })
	for range stormWorkers {
		s.wg.Go(func() { s.dialer(ctx, dial) })
	}
	return s
}

// dialer dials until ctx ends, pausing about stormPause after each
// dial.
func (s *storm) dialer(ctx context.Context, dial dialFunc) {
	for ctx.Err() == nil {
		begin := time.Now()
		c, err := dial(ctx, "tcp", blackholeAddr)
		if err == nil {
			c.Close()
			err = errors.New("the blackhole answered")
		}
		if ctx.Err() != nil {
			return // cancelled by stop: not an outcome
		}
		took := time.Since(begin)
		s.tally.add(err, took, 0)
		if took >= stormTimeout/2 {
			s.timedOut.Add(1)
		}
		select {
		case <-ctx.Done():
		case <-time.After(stormPause/2 + rand.N(stormPause)):
		}
	}
}

// stop ends the storm, waits for its dialers and returns their report.
func (s *storm) stop() report {
	s.cancel()
	s.wg.Wait()
	return s.tally.done(s.start)
}

// dropSYNs makes port a blackhole on the Service host: nftables drops
// every TCP segment to it, so a dial there hangs until it times out.
func dropSYNs(t *testing.T, c *cluster, port string) {
	t.Helper()
	rules := "table ip nsload {\n chain input {\n  type filter hook input priority 0; policy accept;\n  tcp dport " + port + " drop\n }\n}\n"
	_, stderr, code := c.Topo.Run(t, c.Topo.Svc, nstest.ProcOpts{Stdin: strings.NewReader(rules)}, "nft", "-f", "-")
	if code != 0 {
		t.Skipf("nft cannot make a blackhole in the Service namespace (exit %d): %s", code, stderr)
	}
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// deltas is after minus before, series by series.
func deltas(before, after map[string]float64) map[string]float64 {
	d := make(map[string]float64, len(after))
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}
