package nsload

import (
	"strconv"
	"testing"
	"time"
)

// Figures of TestFlowCapRefusesFast.
const (
	flowCap    = 64 // the sidecar's --max-flows-per-peer
	overCap    = 16 // flows tried beyond it
	capXferLen = 256 << 10
	// fastRefusal bounds how long a refused flow may take to fail: far
	// below the sidecar's dial timeout (10 s) and the job's own (10 s),
	// which a flow left hanging would run into.
	fastRefusal = 3 * time.Second
)

// TestFlowCapRefusesFast (row "per-peer flow cap exceeded"): with
// --max-flows-per-peer 64 the job holds 64 echo connections to the
// Service (each proven by a round trip) and then tries 16 more at once.
// Each extra one must fail with a RST (ECONNREFUSED: the sidecar refuses
// before the inner handshake) within fastRefusal, never hang, and
// meshlaunch_flows_denied_total{reason="limit_flows"} must count them.
// The positive controls: the 64 held flows then carry 256 KiB each,
// byte-exact, and once they are closed a new flow works again.
func TestFlowCapRefusesFast(t *testing.T) {
	c := newCluster(t, "--max-flows-per-peer", strconv.Itoa(flowCap))
	job := c.startJobWorker(t)

	rep := job.do(t, time.Minute, "open", "held", sumAddr, strconv.Itoa(flowCap), "16", "E", strconv.Itoa(capXferLen), "10s")
	if rep.OK != flowCap {
		t.Fatalf("positive control: the job opened %d of %d flows under the cap: %v", rep.OK, flowCap, rep)
	}
	before := c.waitMetrics(t, 10*time.Second, func(m map[string]float64) bool { return m[tcpFlows] == flowCap }, tcpFlows)

	rep = job.do(t, time.Minute, "try", sumAddr, strconv.Itoa(overCap), "10s")
	t.Logf("%d flows over the cap: %v", overCap, rep)
	if rep.Outcomes["refused"] != overCap {
		t.Errorf("flows over the cap: %v; want all %d refused (a RST before the handshake)", rep.Outcomes, overCap)
	}
	if slowest := time.Duration(rep.MaxMS * float64(time.Millisecond)); slowest > fastRefusal {
		t.Errorf("the slowest refusal took %v, want under %v", slowest, fastRefusal)
	}
	after := c.metrics(t)
	counted := after[denied("limit_flows")] - before[denied("limit_flows")]
	t.Logf("counted: %s (+%g)", pick(after, denied("limit_flows"), denied("limit_inflight"), tcpFlows), counted)
	if counted < overCap {
		t.Errorf("limit_flows counted %g refusals, want at least %d", counted, overCap)
	}

	rep = job.do(t, time.Minute, "transfer", "held", "30s")
	t.Logf("the held flows: %v", rep)
	if rep.OK != flowCap {
		t.Errorf("positive control: %d of %d held flows carried %d bytes byte-exact: %v", rep.OK, flowCap, capXferLen, rep)
	}
	c.waitMetrics(t, 10*time.Second, func(m map[string]float64) bool { return m[tcpFlows] == 0 }, tcpFlows)
	if rep = job.do(t, time.Minute, "try", sumAddr, "1", "10s"); rep.OK != 1 {
		t.Errorf("positive control: a flow after the others closed: %v", rep)
	}
}
