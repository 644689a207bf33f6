package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// config is how much the benchmark measures.
type config struct {
	reps        int // runs of each measurement, alternating order
	seconds     int // length of one iperf3 run
	pingN       int // timed round trips of one ping-pong run
	pingWarm    int // untimed round trips before them
	pingRuns    int // ping-pong runs per path and round (they are cheap)
	flows       int // concurrent idle flows of the memory measurement
	startupRuns int // runs of "meshlaunch run -- true"
	// only, if set, limits the measured paths to these keys (a partial
	// run, for development: docs/ is not written).
	only []string
}

// selected says whether the path with key is measured in this run.
func (c config) selected(key string) bool {
	return len(c.only) == 0 || slices.Contains(c.only, key)
}

func loadConfig(t *testing.T) config {
	t.Helper()
	cfg := config{reps: 3, seconds: 5, pingN: 2000, pingWarm: 200, pingRuns: 3, flows: 1000, startupRuns: 10}
	for _, v := range []struct {
		env string
		dst *int
		max int
	}{{"MESHLAUNCH_BENCH_REPS", &cfg.reps, 20}, {"MESHLAUNCH_BENCH_SECONDS", &cfg.seconds, 60}} {
		s := os.Getenv(v.env)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > v.max {
			t.Fatalf("%s=%q: want 1..%d", v.env, s, v.max)
		}
		*v.dst = n
	}
	if s := os.Getenv("MESHLAUNCH_BENCH_PATHS"); s != "" {
		cfg.only = strings.Split(s, ",")
	}
	return cfg
}

// path is one way from a client to a server that a user could pick.
type path struct {
	key    string
	name   string // short, for the table and the plot
	client string // where the client runs
	server string // where the servers run
	iperf  string // iperf3 server host:port as the client dials it
	ping   string // ping-pong server as the client dials it
	// reverse adds iperf3 -R (server to client) with one stream.
	reverse bool
	run     runner
	// cpu are the processes whose CPU time one-stream runs are charged
	// with; the first ones, up to costProcs, make up the path's cost.
	cpu       []proc
	costProcs int
	// pprof are the meshlaunch processes on the path, profiled by
	// profilePaths; none for the paths that are not meshlaunch's.
	pprof []pprofTarget
	na    string // why the path is not measured, or ""
}

// paths lists every measured path, in the order of the report.
func (b *bench) paths() []*path {
	node, svc := b.inNS(b.Topo.Node), b.inNS(b.Topo.Svc)
	sidecar := proc{"sidecar", b.Sidecar.Pid()}
	launcher := proc{"launcher", b.launcherPid}
	tunnel := proc{"tunnel", b.tunnel.Pid()}
	withNginx := func(ps ...proc) []proc {
		for i, pid := range childrenOf(b.Ingress.Proc.Pid()) {
			ps = append(ps, proc{"nginx" + strings.Repeat("'", i), pid})
		}
		return ps
	}
	host := func(h, port string) string { return h + ":" + port }
	sidecarPP := pprofTarget{"sidecar", b.Topo.Pod, sidecarPprof}
	launcherPP := pprofTarget{"launcher", b.Topo.Node, launcherPprof}
	tunnelPP := pprofTarget{"tunnel", b.Topo.Node, tunnelPprof}
	ps := []*path{
		{key: "loopback", name: "loopback TCP (limit)", client: "node", server: "node, 127.0.0.1",
			iperf: host("127.0.0.1", iperfPort), ping: host("127.0.0.1", pingPort), run: node},
		{key: "veth", name: "veth between namespaces (limit)", client: "node", server: "edge, " + nstest.EdgeNodeIP,
			iperf: host(nstest.EdgeNodeIP, iperfPort), ping: host(nstest.EdgeNodeIP, pingPort), run: node},
		{key: "slirp4netns", name: "slirp4netns", client: "user+net namespace of nobody in node (10.0.2.100)", server: "node, " + nstest.NodeIP,
			iperf: host(nstest.NodeIP, iperfPort), ping: host(nstest.NodeIP, pingPort), na: b.slirp.na},
		{key: "pasta", name: "pasta", client: "user+net namespace of nobody in node (10.0.2.100)", server: "node, " + nstest.NodeIP,
			iperf: host(nstest.NodeIP, iperfPort), ping: host(nstest.NodeIP, pingPort), na: b.pasta.na},
		{key: "mesh-out", name: "mesh: job → Service", client: "job of meshlaunch run", server: "svc, " + nstest.ServiceIP,
			iperf: host(nstest.ServiceIP, iperfPort), ping: host(nstest.ServiceIP, pingPort), run: b.inJob, reverse: true,
			cpu: withNginx(sidecar, launcher), costProcs: 2, pprof: []pprofTarget{sidecarPP, launcherPP}},
		{key: "mesh-in", name: "mesh: cluster → job (exposed port)", client: "svc", server: "job, " + nstest.PodIP + " (pod IP)",
			iperf: host(nstest.PodIP, jobIperfPort), ping: host(nstest.PodIP, jobPingPort), run: svc,
			cpu: withNginx(sidecar, launcher), costProcs: 2, pprof: []pprofTarget{sidecarPP, launcherPP}},
		{key: "hostnat", name: "host NAT: job → node", client: "job of meshlaunch run", server: "node, " + nstest.NodeIP,
			iperf: host(nstest.NodeIP, iperfPort), ping: host(nstest.NodeIP, pingPort), run: b.inJob,
			cpu: []proc{launcher}, costProcs: 1, pprof: []pprofTarget{launcherPP}},
		{key: "tunnel-L", name: "tunnel -L: node → Service", client: "node, 127.0.0.1:" + localIperfPort + " (-L)", server: "svc, " + nstest.ServiceIP,
			iperf: host("127.0.0.1", localIperfPort), ping: host("127.0.0.1", localPingPort), run: node,
			cpu: withNginx(sidecar, tunnel), costProcs: 2, pprof: []pprofTarget{sidecarPP, tunnelPP}},
		{key: "tunnel-R", name: "tunnel -R: cluster → node", client: "svc", server: "node, 127.0.0.1 (-R " + revIperfPort + ")",
			iperf: host(nstest.PodIP, revIperfPort), ping: host(nstest.PodIP, revPingPort), run: svc,
			cpu: withNginx(sidecar, tunnel), costProcs: 2, pprof: []pprofTarget{sidecarPP, tunnelPP}},
	}
	for _, u := range []struct {
		key string
		ns  userNS
	}{{"slirp4netns", b.slirp}, {"pasta", b.pasta}} {
		if u.ns.na != "" {
			continue
		}
		p := pathByKey(ps, u.key)
		p.run = b.inUserNS(u.ns)
		p.cpu, p.costProcs = []proc{{u.key, u.ns.helper.Pid()}}, 1
	}
	return ps
}

func pathByKey(ps []*path, key string) *path {
	for _, p := range ps {
		if p.key == key {
			return p
		}
	}
	panic("bench: no path " + key)
}

// Kinds of measurement of a path.
const (
	oneStream   = "1 stream"
	fourStreams = "4 streams"
	reverse     = "-R"
	latency     = "latency"
)

// pathResult collects every run of one path.
type pathResult struct {
	bps     map[string][]float64 // kind → bits per second, one per run
	fails   map[string]int       // kind → runs that failed twice
	lastErr map[string]string
	p50     []float64 // µs, one per run
	p99     []float64
	cpu     []cpuRun // one per one-stream run with CPU accounting
}

// cpuRun is the CPU time the path's processes spent on one transfer.
type cpuRun struct {
	gib  float64
	secs map[string]float64
}

func newPathResult() *pathResult {
	return &pathResult{bps: map[string][]float64{}, fails: map[string]int{}, lastErr: map[string]string{}}
}

// results is everything the benchmark measured.
type results struct {
	paths   map[string]*pathResult
	mem     memResult
	startup []float64 // ms
	// startupErr says why start-up was not measured.
	startupErr string
	profiles   profilePhase
	loadBefore string
	loadAfter  string
	elapsed    time.Duration
}

// measurePaths runs every measurement of every available path
// cfg.reps times, alternating the order of paths and of measurements
// from one round to the next.
func (b *bench) measurePaths(t *testing.T, ps []*path) {
	t.Helper()
	b.res.paths = map[string]*pathResult{}
	for _, p := range ps {
		b.res.paths[p.key] = newPathResult()
	}
	for round := range b.cfg.reps {
		order := slices.Clone(ps)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		start := time.Now()
		for _, p := range order {
			if p.na != "" || !b.cfg.selected(p.key) {
				continue
			}
			kinds := []string{oneStream, fourStreams}
			if p.reverse {
				kinds = append(kinds, reverse)
			}
			kinds = append(kinds, latency)
			if round%2 == 1 {
				slices.Reverse(kinds)
			}
			for _, k := range kinds {
				if k == latency {
					for range b.cfg.pingRuns {
						b.ping(t, p)
					}
				} else {
					b.iperf(t, p, k)
				}
			}
		}
		t.Logf("round %d of %d: %v", round+1, b.cfg.reps, time.Since(start).Round(time.Second))
	}
}

// iperfJSON is what the benchmark reads of "iperf3 -J".
type iperfJSON struct {
	Error string `json:"error"`
	End   struct {
		SumSent     iperfSum `json:"sum_sent"`
		SumReceived iperfSum `json:"sum_received"`
	} `json:"end"`
}

type iperfSum struct {
	Bytes         int64   `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
}

// parseIperf reads the output of one "iperf3 -J" run: the receiver's
// totals, or why the run failed.
func parseIperf(stdout, stderr string, code int) (iperfSum, error) {
	var out iperfJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		return iperfSum{}, fmt.Errorf("exit %d, no JSON (%v): %s", code, err, lastLine(stderr+stdout))
	}
	if out.Error != "" || code != 0 {
		return iperfSum{}, fmt.Errorf("exit %d: %s %s", code, out.Error, lastLine(stderr))
	}
	if out.End.SumReceived.Bytes == 0 {
		return iperfSum{}, errors.New("no bytes received")
	}
	return out.End.SumReceived, nil
}

// iperfArgv is the client's command line for one kind of run.
func (b *bench) iperfArgv(p *path, kind string) []string {
	return iperfArgvFor(p, kind, b.cfg.seconds)
}

// iperfArgvFor is the client's command line for one kind of run of
// seconds.
func iperfArgvFor(p *path, kind string, seconds int) []string {
	h, port, _ := strings.Cut(p.iperf, ":")
	argv := []string{"iperf3", "-c", h, "-p", port, "-t", strconv.Itoa(seconds), "-J", "--connect-timeout", "5000"}
	switch kind {
	case fourStreams:
		argv = append(argv, "-P", "4")
	case reverse:
		argv = append(argv, "-R")
	}
	return argv
}

// iperf runs one iperf3 measurement, retried once after a failure (a
// busy server, say), and records it.
func (b *bench) iperf(t *testing.T, p *path, kind string) {
	t.Helper()
	res := b.res.paths[p.key]
	argv := b.iperfArgv(p, kind)
	timeout := time.Duration(b.cfg.seconds)*time.Second + 30*time.Second
	var err error
	for try := range 2 {
		if try > 0 {
			time.Sleep(2 * time.Second)
		}
		var before, after map[string]float64
		account := kind == oneStream && len(p.cpu) > 0
		if account {
			if before, err = cpuSnapshot(p.cpu); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
		}
		stdout, stderr, code := p.run(t, argv, nil, timeout)
		if account {
			if after, err = cpuSnapshot(p.cpu); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
		}
		var sum iperfSum
		if sum, err = parseIperf(stdout, stderr, code); err == nil {
			res.bps[kind] = append(res.bps[kind], sum.BitsPerSecond)
			t.Logf("%s, %s: %.2f Gbit/s", p.name, kind, sum.BitsPerSecond/1e9)
			if account {
				run := cpuRun{gib: float64(sum.Bytes) / (1 << 30), secs: map[string]float64{}}
				for name, s := range after {
					run.secs[name] = s - before[name]
				}
				res.cpu = append(res.cpu, run)
			}
			return
		}
		t.Logf("%s, %s, try %d: %v", p.name, kind, try+1, err)
	}
	res.fails[kind]++
	res.lastErr[kind] = err.Error()
}

// ping runs one ping-pong measurement and records it.
func (b *bench) ping(t *testing.T, p *path) {
	t.Helper()
	res := b.res.paths[p.key]
	argv := []string{b.Roles, p.ping, strconv.Itoa(b.cfg.pingN), strconv.Itoa(b.cfg.pingWarm)}
	var err error
	for try := range 2 {
		stdout, stderr, code := p.run(t, argv, []string{roleEnv + "=pingclient"}, 60*time.Second)
		var r pingResult
		if code != 0 {
			err = fmt.Errorf("exit %d: %s", code, lastLine(stderr))
		} else if jerr := json.Unmarshal([]byte(stdout), &r); jerr != nil {
			err = fmt.Errorf("bad output %q: %v", stdout, jerr)
		} else {
			res.p50 = append(res.p50, r.P50)
			t.Logf("%s, ping-pong: p50 %.0f µs, p99 %.0f µs", p.name, r.P50, r.P99)
			res.p99 = append(res.p99, r.P99)
			return
		}
		t.Logf("%s, ping-pong, try %d: %v", p.name, try+1, err)
	}
	res.fails[latency]++
	res.lastErr[latency] = err.Error()
}

// memResult is the memory measurement, in KiB.
type memResult struct {
	sidecarIdle, launcherIdle, childIdle int64
	sidecarFlows, launcherFlows          int64
	hold                                 holdReport
	holdErr                              string
	jobNoFile                            string // "soft/hard" from ulimit in the job
	sidecarEnd, sidecarPeak              int64  // after every path
	launcherEnd, launcherPeak            int64
}

// rssMedian reads VmRSS of pid three times, a second apart, and returns
// the median.
func rssMedian(t *testing.T, pid int) int64 {
	t.Helper()
	var v []int64
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		kib, err := statusKiB(pid, "VmRSS")
		if err != nil {
			t.Fatalf("VmRSS of %d: %v", pid, err)
		}
		v = append(v, kib)
	}
	slices.Sort(v)
	return v[1]
}

// measureMemory reads the sidecar's and the launcher's RSS with the
// launcher connected and idle, then with cfg.flows idle TCP flows from
// the job through the mesh to the sink in svc.
func (b *bench) measureMemory(t *testing.T) {
	t.Helper()
	m := &b.res.mem
	time.Sleep(2 * time.Second) // the handshake and start-up settle
	m.sidecarIdle = rssMedian(t, b.Sidecar.Pid())
	m.launcherIdle = rssMedian(t, b.launcherPid)
	m.childIdle = rssMedian(t, b.childPid)

	stdout, stderr, code := b.inJob(t, []string{"sh", "-c", `echo "$(ulimit -Sn)/$(ulimit -Hn)"`}, nil, 10*time.Second)
	if code != 0 {
		t.Fatalf("ulimit in the job: exit %d: %s", code, stderr)
	}
	m.jobNoFile = strings.TrimSpace(stdout)

	argv := []string{b.Roles, nstest.ServiceIP + ":" + sinkPort, strconv.Itoa(b.cfg.flows)}
	b.note("1,000 idle flows as the job", "job", nobody, append([]string{roleEnv + "=hold"}, argv...)...)
	pid, out := b.startInJob(t, argv, []string{roleEnv + "=hold"})
	defer b.stopInJob(t, pid)
	deadline := time.Now().Add(90 * time.Second)
	for {
		text, _ := os.ReadFile(out)
		if strings.Contains(string(text), `"held"`) {
			if err := json.Unmarshal(text, &m.hold); err != nil {
				t.Fatalf("hold: %q: %v", text, err)
			}
			break
		}
		if strings.Contains(string(text), "role hold:") || time.Now().After(deadline) {
			m.holdErr = cmpOr(lastLine(string(text)), "no report within 90 s")
			t.Errorf("%d idle flows: %s", b.cfg.flows, m.holdErr)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	m.sidecarFlows = rssMedian(t, b.Sidecar.Pid())
	m.launcherFlows = rssMedian(t, b.launcherPid)
}

// finalMemory reads RSS and peak RSS after every path has run.
func (b *bench) finalMemory(t *testing.T) {
	t.Helper()
	m := &b.res.mem
	for _, r := range []struct {
		pid       int
		rss, peak *int64
		what      string
	}{{b.Sidecar.Pid(), &m.sidecarEnd, &m.sidecarPeak, "sidecar"}, {b.launcherPid, &m.launcherEnd, &m.launcherPeak, "launcher"}} {
		var err1, err2 error
		*r.rss, err1 = statusKiB(r.pid, "VmRSS")
		*r.peak, err2 = statusKiB(r.pid, "VmHWM")
		if err := errors.Join(err1, err2); err != nil {
			t.Errorf("%s: %v", r.what, err)
		}
	}
}

// measureStartup times cfg.startupRuns runs of "meshlaunch run -- true"
// as nobody in node, one after the other, each from fork to reaping.
func (b *bench) measureStartup(t *testing.T) {
	t.Helper()
	argv := append([]string{b.Roles, strconv.Itoa(b.cfg.startupRuns), "--"}, b.runArgv(nil, "true")...)
	b.note("start-up, timed by this package's timeit role", "node", nobody+", private /dev/net/tun 0666",
		append([]string{roleEnv + "=timeit"}, argv...)...)
	opts := launcherOpts(3 * time.Minute)
	opts.Env = append(opts.Env, roleEnv+"=timeit")
	stdout, stderr, code := b.Topo.Run(t, b.Topo.Node, opts, append(b.asNobodyWithTun(t), argv...)...)
	var out struct {
		MS []float64 `json:"ms"`
	}
	if code != 0 {
		b.res.startupErr = lastLine(stderr)
		t.Errorf("start-up: exit %d:\n%s", code, stderr)
		return
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("start-up: %q: %v", stdout, err)
	}
	b.res.startup = out.MS
}

func cmpOr(a, b string) string {
	if a == "" || a == "(no output)" {
		return b
	}
	return a
}

// median of v; NaN-free callers only. 0 for no values.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
