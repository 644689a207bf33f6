package soak

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// metricsURL is the sidecar's /metrics, reached from inside the pod.
const metricsURL = "http://" + nstest.SidecarAddr + "/metrics"

// sample is one reading of the sidecar's process from its /metrics.
type sample struct {
	at         time.Time
	goroutines float64 // go_goroutines
	fds        float64 // process_open_fds
	rss        float64 // process_resident_memory_bytes
	sessions   float64 // meshlaunch_websocket_sessions_total
	peers      float64 // meshlaunch_peers_connected
	heap       float64 // go_memstats_heap_inuse_bytes: tells a live-heap leak from pages not yet returned
}

// sampleSeries are the series a sample reads, in its field order.
var sampleSeries = []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes",
	"meshlaunch_websocket_sessions_total", "meshlaunch_peers_connected", "go_memstats_heap_inuse_bytes"}

// scrape reads one sample.
func (c *cluster) scrape(ctx context.Context) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := get(ctx, c.pod, metricsURL)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return sample{}, fmt.Errorf("read %s: %w", metricsURL, err)
	}
	v, err := seriesValues(string(body), sampleSeries)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", metricsURL, err)
	}
	return sample{at: time.Now(), goroutines: v[0], fds: v[1], rss: v[2], sessions: v[3], peers: v[4], heap: v[5]}, nil
}

// seriesValues reads unlabelled series from the Prometheus text format;
// every one must be present.
func seriesValues(body string, names []string) ([]float64, error) {
	found := make(map[string]float64, len(names))
	for line := range strings.Lines(body) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err == nil {
			found[f[0]] = v
		}
	}
	out := make([]float64, len(names))
	for i, n := range names {
		v, ok := found[n]
		if !ok {
			return nil, fmt.Errorf("no series %s", n)
		}
		out[i] = v
	}
	return out, nil
}

// peakOf keeps the highest reading of each figure.
func peakOf(a, b sample) sample {
	return sample{at: b.at, goroutines: max(a.goroutines, b.goroutines), fds: max(a.fds, b.fds),
		rss: max(a.rss, b.rss), sessions: max(a.sessions, b.sessions), heap: max(a.heap, b.heap)}
}

// limits are the highest end figures a start sample allows (config.go's
// margins).
func limits(start sample) sample {
	return sample{goroutines: start.goroutines + goroutineMargin, fds: start.fds + fdMargin,
		rss: start.rss*rssFactor + rssSlack}
}

// within reports whether s is at or under the limits.
func (s sample) within(lim sample) bool {
	return s.goroutines <= lim.goroutines && s.fds <= lim.fds && s.rss <= lim.rss
}

func (s sample) String() string {
	return fmt.Sprintf("goroutines %.0f, fds %.0f, RSS %s (heap in use %s), websocket sessions %.0f",
		s.goroutines, s.fds, mib(s.rss), mib(s.heap), s.sessions)
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// flowSeries returns the sidecar's flow and DNS series (gauges of live
// flows, totals, refusals by reason), one per line, for the report.
func (c *cluster) flowSeries(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := get(ctx, c.pod, metricsURL)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for line := range strings.Lines(string(body)) {
		for _, p := range []string{"meshlaunch_flows", "meshlaunch_dns", "meshlaunch_ingress", "meshlaunch_websocket_queue"} {
			if strings.HasPrefix(line, p) {
				b.WriteString(line)
			}
		}
	}
	return b.String()
}
