package launcher_test

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/launcher"
)

// The test network: addresses from the ranges the design reserves for tests.
var (
	podIP       = netip.MustParseAddr("10.244.1.5")
	serviceAddr = netip.MustParseAddr("10.96.0.10")
	testRoutes  = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("198.18.0.0/15")}
	testDNS     = launcher.DNS{
		Nameservers: []netip.Addr{serviceAddr},
		Search:      []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Ndots:       5,
	}
)

const testMTU = 1400

func testConfig() launcher.Config {
	return launcher.Config{
		Addr: podIP, MTU: testMTU, Routes: testRoutes, ServiceAddr: serviceAddr, DNS: testDNS,
		KillGrace: 5 * time.Second,
	}
}

// startJob starts argv in the namespace with cfg, stdout to a file it
// returns; the job is killed and the TUN closed at cleanup.
func startJob(t *testing.T, cfg launcher.Config, argv ...string) (*launcher.Job, *os.File) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cfg.Stdout = out
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	j, err := launcher.Start(ctx, cfg, argv)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		j.Close()
		j.TUN().Close()
	})
	return j, out
}

// runJob runs argv to completion and returns its exit code and stdout.
func runJob(t *testing.T, cfg launcher.Config, argv ...string) (int, string) {
	t.Helper()
	j, out := startJob(t, cfg, argv...)
	if err := j.Go(t.Context()); err != nil {
		t.Fatalf("Go: %v", err)
	}
	code, err := j.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}

// selfRole is the argv and environment that run this test binary in role.
func selfRole(t *testing.T, cfg *launcher.Config, role string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Env = append(os.Environ(), roleEnv+"="+role)
	return []string{exe}
}

// markerProcs lists the pids whose command line contains marker.
func markerProcs(marker string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}
