package nsload

import (
	"strconv"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// Figures of TestIngressFiveHundred.
const (
	ingressCount = 500 // connections held at once, and the sidecar's --max-ingress
	overIngress  = 20  // connections tried beyond it
	ingressLen   = 256 << 10
)

// TestIngressFiveHundred (row "500 concurrent ingress connections to an
// exposed pod port"): the job, run by "meshlaunch run" as nobody, serves
// the echo protocol on the exposed port 9000; a client in the Service
// namespace opens 500 connections to the pod IP at once, proving each
// reaches the job with a round trip, and holds them. The sidecar runs
// with --max-ingress 500, so 20 more connections are refused: the pod's
// kernel accepts them and the sidecar resets them at once (a RST or an
// EOF within fastRefusal, never a hang), counted as
// meshlaunch_ingress_total{outcome="refused_limit"}. Then all 500 carry
// 256 KiB each, byte-exact, and once they are closed a new connection
// works again.
func TestIngressFiveHundred(t *testing.T) {
	c := newCluster(t, "--max-ingress", strconv.Itoa(ingressCount))
	c.startLauncher(t, nil, c.roleJob("sumserver", "0.0.0.0:"+jobPort)...)
	client := c.startWorkerIn(t, c.Topo.Svc)
	target := nstest.PodIP + ":" + jobPort
	base := c.metrics(t)
	baseProc := c.sidecarProc(t)

	s := c.startSampler(t, 200*time.Millisecond)
	rep := client.do(t, 2*time.Minute, "open", "in", target, strconv.Itoa(ingressCount), strconv.Itoa(ingressCount), "E", strconv.Itoa(ingressLen), "30s")
	t.Logf("open: %v", rep)
	if rep.OK != ingressCount {
		t.Fatalf("%d of %d connections reached the job: %v", rep.OK, ingressCount, rep)
	}
	held := c.waitMetrics(t, 10*time.Second, func(m map[string]float64) bool { return m[ingressNow] == ingressCount }, ingressNow)
	t.Logf("held: %s", pick(held, ingressNow, ingressTotal("accepted"), goroutines, openFDs))

	rep = client.do(t, time.Minute, "try", target, strconv.Itoa(overIngress), "10s")
	t.Logf("%d over the cap: %v", overIngress, rep)
	if refused := rep.Outcomes["reset"] + rep.Outcomes["eof"]; refused != overIngress {
		t.Errorf("connections over --max-ingress: %v; want all %d reset or closed", rep.Outcomes, overIngress)
	}
	if slowest := time.Duration(rep.MaxMS * float64(time.Millisecond)); slowest > fastRefusal {
		t.Errorf("the slowest refusal took %v, want under %v", slowest, fastRefusal)
	}
	m := c.metrics(t)
	if got := m[ingressTotal("refused_limit")] - base[ingressTotal("refused_limit")]; got != overIngress {
		t.Errorf("refused_limit counted %g, want %d", got, overIngress)
	}

	rep = client.do(t, 2*time.Minute, "transfer", "in", "90s")
	peaks, _ := s.stop()
	t.Logf("transfer: %v", rep)
	if rep.OK != ingressCount || rep.Bytes != ingressCount*ingressLen {
		t.Errorf("%d of %d connections echoed %d bytes byte-exact: %v", rep.OK, ingressCount, ingressLen, rep)
	}
	after := c.waitMetrics(t, 30*time.Second, func(m map[string]float64) bool {
		return m[ingressNow] == 0 && m[goroutines] <= base[goroutines]+goroutineSlack
	}, ingressNow, goroutines)
	t.Logf("sidecar: baseline %s, VmRSS %.1f MiB; peaks VmRSS %.1f MiB, fds %.0f; after %s; counted %s",
		pick(base, goroutines, openFDs), baseProc.rssMiB, peaks[peakRSS], peaks[peakFDs], pick(after, ingressNow, goroutines, openFDs),
		pick(after, ingressTotal("accepted"), ingressTotal("refused_limit")))
	if rep = client.do(t, time.Minute, "try", target, "1", "10s"); rep.OK != 1 {
		t.Errorf("positive control: a connection after the others closed: %v", rep)
	}
}
