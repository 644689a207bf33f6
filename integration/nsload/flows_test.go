package nsload

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Figures of the 1,000-flow tests.
const (
	flowCount = 1000
	flowSize  = 1 << 20
	// dialBatch is how many of the flows the job dials at once: below
	// the sidecar's --max-dials-per-peer (128), which would refuse the
	// rest with a RST (TestFlowCapRefusesFast covers refusals).
	dialBatch = 64
	// goroutineSlack is how far above its baseline the sidecar's
	// goroutine count may settle once the flows are closed.
	goroutineSlack = 10
)

// TestThousandEgressFlows (row "1,000 concurrent egress TCP flows from
// one job, 1 MiB each, byte-checked"): the job, run by "meshlaunch run"
// as nobody, opens 1,000 TCP connections to a server on the Service IP,
// holds them all, then uploads 1 MiB on every one at once; the server
// answers each with the SHA-256 of what it read, which the job compares
// with its own. Every flow must complete and match. Once the flows are
// closed the sidecar's established flows go back to 0 and its
// goroutines to their baseline.
//
// The RSS budget is the sidecar container's memory limit in the shadow
// pod's manifest (256 MiB), which the kernel enforces by killing the
// sidecar; the sidecar runs with that manifest's GOMEMLIMIT (200 MiB), as
// deployed. Peaks of 175–237 MiB were measured on the shared 2-core
// machine (240–250 MiB without GOMEMLIMIT): the margin is thin, and
// shrinks as the server drains the uploads more slowly than the tunnel
// brings them (the sidecar then holds up to a TCP window per flow; see
// TestThousandEgressDownloads). The idle flows' cost (docs/benchmarks.md:
// +34 MiB for 1,000; 37–43 MiB here) is logged, not asserted.
func TestThousandEgressFlows(t *testing.T) {
	thousandFlows(t, modeUpload)
}

// TestThousandEgressDownloads is TestThousandEgressFlows the other way:
// the server sends 1 MiB on each of the 1,000 flows, which the job checks
// byte by byte, under the same budget. It fails today: the sidecar
// buffers up to a full TCP send buffer (1 MiB by default,
// netstack.tcpSendBufDefault) per flow towards a job that reads slower
// than the cluster sends: 1,000 such flows took it to 1.0–1.2 GiB, four
// times the pod's memory limit (GOMEMLIMIT cannot help: the memory is
// live). It runs with MESHLAUNCH_KNOWN_BUGS=1.
func TestThousandEgressDownloads(t *testing.T) {
	if os.Getenv("MESHLAUNCH_KNOWN_BUGS") != "1" {
		t.Skip("known bug: the sidecar buffers up to 1 MiB per egress flow towards the job (1,000 downloads: ~1 GiB RSS, " +
			"over the pod's 256 MiB limit); set MESHLAUNCH_KNOWN_BUGS=1 to run")
	}
	thousandFlows(t, modeDownload)
}

// thousandFlows runs flowCount flows of flowSize bytes in mode from the
// job to the Service's sumserver and checks the sidecar's RSS,
// goroutines and flows.
func thousandFlows(t *testing.T, mode byte) {
	budget := deployedSidecar(t).memLimitMiB
	c := newCluster(t)
	job := c.startJobWorker(t)
	base := c.metrics(t)
	baseProc := c.sidecarProc(t)
	t.Logf("baseline, one peer joined: %s, VmRSS %.1f MiB", pick(base, goroutines, openFDs), baseProc.rssMiB)

	rep := job.do(t, 2*time.Minute, "open", "flows", sumAddr, strconv.Itoa(flowCount), strconv.Itoa(dialBatch),
		string(mode), strconv.Itoa(flowSize), "30s")
	t.Logf("open: %v", rep)
	if rep.OK != flowCount {
		t.Fatalf("the job opened %d of %d flows: %v", rep.OK, flowCount, rep)
	}
	held := c.waitMetrics(t, 10*time.Second, func(m map[string]float64) bool { return m[tcpFlows] == flowCount }, tcpFlows)
	heldProc := c.sidecarProc(t)
	t.Logf("%d flows open: %s, VmRSS %.1f MiB (+%.1f MiB)", flowCount, pick(held, tcpFlows, goroutines, openFDs),
		heldProc.rssMiB, heldProc.rssMiB-baseProc.rssMiB)

	s := c.startSampler(t, 200*time.Millisecond)
	rep = job.do(t, 3*time.Minute, "transfer", "flows", "150s")
	peaks, samples := s.stop()
	t.Logf("transfer: %v", rep)
	if rep.OK != flowCount || rep.Bytes != flowCount*flowSize {
		t.Errorf("%d of %d flows completed byte-exact (%d bytes): %v", rep.OK, flowCount, rep.Bytes, rep)
	}
	st := c.sidecarProc(t)
	t.Logf("sidecar during the transfer (%d samples): peak VmRSS %.1f MiB, peak fds %.0f; VmHWM over the test %.1f MiB (budget %.0f MiB)",
		samples, peaks[peakRSS], peaks[peakFDs], st.hwmMiB, budget)
	if st.hwmMiB > budget {
		t.Errorf("sidecar peak RSS %.1f MiB, over its pod's memory limit of %.0f MiB", st.hwmMiB, budget)
	}

	limit := base[goroutines] + goroutineSlack
	after := c.waitMetrics(t, 30*time.Second, func(m map[string]float64) bool {
		return m[tcpFlows] == 0 && m[goroutines] <= limit
	}, tcpFlows, goroutines)
	t.Logf("after close: %s (baseline %g, limit %g), VmRSS %.1f MiB", pick(after, tcpFlows, goroutines, openFDs),
		base[goroutines], limit, c.sidecarProc(t).rssMiB)
}
