package nsfaults

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// Sidecar metrics the tests read (sidecar/metrics.go).
const (
	metricSessions   = "meshlaunch_websocket_sessions_total"
	metricTunnelTCP  = `meshlaunch_tunnel_total{outcome="tcp_stream"}`
	metricTunnelLive = "meshlaunch_tunnel_websockets"
)

// metrics scrapes the sidecar's /metrics from the edge namespace, straight
// to the pod (not through the relay or nginx), and returns every sample by
// its name and labels as exposed, e.g. `x_total{outcome="ok"}`.
func (c *cluster) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	tr := &http.Transport{DialContext: nstest.DialerIn(t, c.Topo.Edge), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + nstest.SidecarAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape the sidecar's metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape the sidecar's metrics: %s", resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		t.Fatalf("parse the sidecar's metrics: %v", err)
	}
	return m
}

// metric returns one sample, failing t if the sidecar does not expose it.
func metric(t *testing.T, m map[string]float64, name string) float64 {
	t.Helper()
	v, ok := m[name]
	if !ok {
		t.Fatalf("the sidecar exposes no %s", name)
	}
	return v
}

// parseMetrics reads the Prometheus text format: "NAME{LABELS} VALUE".
func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}
