package nsload

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// Series of the sidecar's /metrics the tests read.
const (
	goroutines  = "go_goroutines"
	openFDs     = "process_open_fds"
	tcpFlows    = `meshlaunch_flows{proto="tcp",state="established"}`
	tcpDialing  = `meshlaunch_flows{proto="tcp",state="dialing"}`
	udpSessions = `meshlaunch_flows{proto="udp",state="active"}`
	ingressNow  = `meshlaunch_flows{proto="ingress",state="active"}`
)

func denied(reason string) string { return `meshlaunch_flows_denied_total{reason="` + reason + `"}` }

func ingressTotal(outcome string) string {
	return `meshlaunch_ingress_total{outcome="` + outcome + `"}`
}

func dnsQueries(outcome string) string {
	return `meshlaunch_dns_queries_total{outcome="` + outcome + `"}`
}

// scrape reads the sidecar's /metrics from inside the pod: every series
// (name{labels}) and its value.
func (c *cluster) scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nstest.SidecarAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.pod.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: %s, %v", resp.Status, err)
	}
	m := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, nil
}

// metrics is scrape, failing t on error.
func (c *cluster) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitMetrics scrapes until cond holds and returns that scrape; it fails
// t after timeout, showing the last values of show.
func (c *cluster) waitMetrics(t *testing.T, timeout time.Duration, cond func(map[string]float64) bool, show ...string) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m := c.metrics(t)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar metrics did not settle within %v: %s", timeout, pick(m, show...))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pick formats some series of m.
func pick(m map[string]float64, series ...string) string {
	var b strings.Builder
	for _, s := range series {
		fmt.Fprintf(&b, "%s=%g ", s, m[s])
	}
	return strings.TrimSpace(b.String())
}

// procStatus is the sidecar's resident memory (VmRSS) and its peak
// (VmHWM) in MiB, and the number of its open file descriptors, from /proc.
type procStatus struct {
	rssMiB, hwmMiB float64
	fds            int
}

// sidecarProc reads the sidecar's procStatus.
func (c *cluster) sidecarProc(t *testing.T) procStatus {
	t.Helper()
	st, err := readProc(c.Sidecar.Pid())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func readProc(pid int) (procStatus, error) {
	var st procStatus
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("sidecar status: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch {
		case err != nil:
		case k == "VmRSS":
			st.rssMiB = kb / 1024
		case k == "VmHWM":
			st.hwmMiB = kb / 1024
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return st, fmt.Errorf("sidecar fds: %w", err)
	}
	st.fds = len(fds)
	return st, nil
}

// sampler reads the sidecar's /proc figures and some /metrics series
// every interval until stop, and keeps the largest value of each.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	peak   map[string]float64
	n      int
}

// Keys of a sampler's peaks besides the /metrics series.
const (
	peakFDs = "fds (/proc)"
	peakRSS = "VmRSS MiB"
)

// startSampler samples until stop; series are /metrics series to follow
// as well (none: /proc only).
func (c *cluster) startSampler(t *testing.T, interval time.Duration, series ...string) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{cancel: cancel, done: make(chan struct{}), peak: map[string]float64{}}
	t.Cleanup(func() { s.stop() })
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s.sample(ctx, c, series)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample(ctx context.Context, c *cluster, series []string) {
	got := map[string]float64{}
	if st, err := readProc(c.Sidecar.Pid()); err == nil {
		got[peakFDs], got[peakRSS] = float64(st.fds), st.rssMiB
	}
	if len(series) > 0 {
		if m, err := c.scrape(ctx); err == nil {
			for _, k := range series {
				got[k] = m[k]
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	for k, v := range got {
		s.peak[k] = max(s.peak[k], v)
	}
}

// stop ends the sampling, waits for it, and returns the peaks and the
// number of samples.
func (s *sampler) stop() (map[string]float64, int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.peak), s.n
}
