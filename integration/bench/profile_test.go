package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// The profiling phase: per path, one one-stream iperf3 run of
// profileTransfer and, from profileOffset into it (past the connections
// and handshakes), a CPU profile of profileSeconds of each meshlaunch
// process on the path.
const (
	profileTransfer = 6 // seconds
	profileOffset   = time.Second
	profileSeconds  = 4
	// profilesEnv names a directory that keeps the raw profiles; without
	// it they go to a temporary directory removed at the end.
	profilesEnv = "MESHLAUNCH_BENCH_PROFILES"
)

// pprofTarget is the --pprof-addr endpoint of one meshlaunch process.
type pprofTarget struct {
	proc string // "sidecar", "launcher" or "tunnel"
	ns   string // the network namespace whose loopback it listens on
	addr string
}

// profilePhase is what the profiling phase measured.
type profilePhase struct {
	paths   []pathProfiles
	dir     string // the raw profiles
	kept    bool   // dir outlives the benchmark (profilesEnv)
	na      string // why nothing was summarised, or ""
	elapsed time.Duration
}

// pathProfiles is the profiled transfer of one path.
type pathProfiles struct {
	path     *path
	bps      float64 // the transfer's rate, 0 if it failed
	iperfErr string
	procs    []procProfile
}

// procProfile is one process's CPU profile during the transfer.
type procProfile struct {
	proc string
	file string
	sum  profileSummary
	err  string // why there is no summary, or ""
}

// profilePaths runs the profiling phase on every selected path that has
// meshlaunch processes.
func (b *bench) profilePaths(t *testing.T, ps []*path) {
	t.Helper()
	start := time.Now()
	ph := &b.res.profiles
	if ph.dir = os.Getenv(profilesEnv); ph.dir != "" {
		if err := os.MkdirAll(ph.dir, 0o755); err != nil {
			t.Fatalf("%s: %v", profilesEnv, err)
		}
		ph.kept = true
	} else {
		ph.dir = t.TempDir()
	}
	goBin, err := goCommand()
	if err != nil {
		ph.na = err.Error()
	}
	noted := map[string]bool{}
	for _, p := range ps {
		if len(p.pprof) == 0 || p.na != "" || !b.cfg.selected(p.key) {
			continue
		}
		for _, tg := range p.pprof {
			if !noted[tg.proc] {
				noted[tg.proc] = true
				b.note("CPU profile of the "+tg.proc+" (profiling phase, Go's HTTP client inside the namespace)", b.nsLabel(tg.ns), "root",
					fmt.Sprintf("GET http://%s/debug/pprof/profile?seconds=%d", tg.addr, profileSeconds))
			}
		}
		pp := b.profilePath(t, p, ph.dir, goBin)
		ph.paths = append(ph.paths, pp)
	}
	ph.elapsed = time.Since(start)
	t.Logf("profiling phase: %d paths in %v; raw profiles in %s", len(ph.paths), ph.elapsed.Round(time.Second), ph.dir)
}

// profilePath profiles p's processes during one iperf3 transfer and
// summarises the profiles with goBin ("" if there is none).
func (b *bench) profilePath(t *testing.T, p *path, dir, goBin string) pathProfiles {
	t.Helper()
	res := pathProfiles{path: p, procs: make([]procProfile, len(p.pprof))}
	clients := make([]*http.Client, len(p.pprof))
	for i, tg := range p.pprof {
		clients[i] = pprofClient(t, tg.ns)
		res.procs[i] = procProfile{proc: tg.proc, file: filepath.Join(dir, p.key+"-"+tg.proc+".pb.gz")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), profileTransfer*time.Second+time.Minute)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // also if p.run fails the test
	for i, tg := range p.pprof {
		wg.Go(func() {
			if err := fetchProfile(ctx, clients[i], tg.addr, res.procs[i].file); err != nil {
				res.procs[i].err = err.Error()
			}
		})
	}
	stdout, stderr, code := p.run(t, iperfArgvFor(p, oneStream, profileTransfer), nil, profileTransfer*time.Second+30*time.Second)
	wg.Wait()
	if sum, err := parseIperf(stdout, stderr, code); err != nil {
		res.iperfErr = err.Error()
		t.Logf("%s, profiling run: %v", p.name, err)
	} else {
		res.bps = sum.BitsPerSecond
	}
	for i := range res.procs {
		pr := &res.procs[i]
		switch {
		case pr.err != "":
		case goBin == "":
			pr.err = "not summarised: " + b.res.profiles.na
		default:
			sum, err := summariseProfile(ctx, goBin, pr.file)
			if err != nil {
				pr.err = err.Error()
			}
			pr.sum = sum
		}
		if pr.err != "" {
			t.Logf("%s, %s profile: %s", p.name, pr.proc, pr.err)
		}
	}
	return res
}

// pprofClient is an HTTP client whose connections are made in network
// namespace ns (nstest.DialerIn): the endpoints listen on its loopback.
func pprofClient(t *testing.T, ns string) *http.Client {
	t.Helper()
	return &http.Client{Transport: &http.Transport{DialContext: nstest.DialerIn(t, ns), DisableKeepAlives: true}}
}

// fetchProfile waits profileOffset, then takes a CPU profile of
// profileSeconds from the pprof endpoint at addr and writes it to file.
func fetchProfile(ctx context.Context, c *http.Client, addr, file string) error {
	wait := time.NewTimer(profileOffset)
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, profileSeconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: read the profile: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, lastLine(string(body)))
	}
	if err := os.WriteFile(file, body, 0o644); err != nil {
		return fmt.Errorf("write the profile: %w", err)
	}
	return nil
}
