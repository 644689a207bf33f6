package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBench is `make bench`: it measures every path and writes
// docs/benchmarks.md and docs/benchmarks.svg. It never fails on a number;
// it fails when meshlaunch cannot carry the traffic at all.
func TestBench(t *testing.T) {
	if !enabled() {
		t.Skip("the benchmark runs only with " + benchEnv + "=1 (make bench)")
	}
	for _, tool := range []string{"iperf3", "nsenter", "unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the benchmark needs %s: %v", tool, err)
		}
	}
	cfg := loadConfig(t)
	start := time.Now()
	load := loadAverage()
	b := newBench(t, cfg) // skips unless root
	b.res.loadBefore = load
	t.Logf("topology %s ready after %v", b.Topo.Prefix, time.Since(start).Round(time.Millisecond))

	// "meshlaunch run -- true" first: the long-lived launcher below holds
	// the peer's session, and each new launcher would take it over.
	b.measureStartup(t)
	b.startLauncher(t)
	b.measureMemory(t)
	b.startJobServers(t)
	b.startTunnel(t)
	b.startSlirp(t)
	b.startPasta(t)
	for _, u := range []struct {
		name string
		ns   userNS
	}{{"slirp4netns", b.slirp}, {"pasta", b.pasta}} {
		if u.ns.na != "" {
			t.Logf("%s: not available: %s", u.name, u.ns.na)
		}
	}
	ps := b.paths()
	b.measurePaths(t, ps)
	b.finalMemory(t)
	b.profilePaths(t, ps) // after finalMemory: the profiles cost the processes memory
	b.res.loadAfter = loadAverage()
	b.res.elapsed = time.Since(start)

	for _, p := range ps {
		r := b.res.paths[p.key]
		ours := strings.HasPrefix(p.key, "mesh") || p.key == "hostnat" || strings.HasPrefix(p.key, "tunnel")
		if ours && len(r.bps[oneStream]) == 0 && cfg.selected(p.key) {
			t.Errorf("%s: no iperf3 run succeeded: %s", p.name, r.lastErr[oneStream])
		}
	}

	rep := b.report(ps)
	if len(cfg.only) > 0 {
		fmt.Print("\n" + rep.table + "\n")
		t.Logf("partial run (MESHLAUNCH_BENCH_PATHS=%s): docs/ not written", strings.Join(cfg.only, ","))
		return
	}
	docs := filepath.Join(moduleDir, "docs")
	if err := os.WriteFile(filepath.Join(docs, "benchmarks.md"), []byte(rep.markdown), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docs, "benchmarks.svg"), []byte(rep.svg), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Print("\n" + rep.table + "\n")
	t.Logf("wrote %s and benchmarks.svg in %v", filepath.Join(docs, "benchmarks.md"), b.res.elapsed.Round(time.Second))
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
