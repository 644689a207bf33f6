package nsfaults

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
)

// TestThrottledCarrierKeepsInteractiveFlowAnswering: on a 1 Mbit/s
// carrier (both directions throttled at the relay) a job downloads 2 MiB
// while an interactive request/response flow runs beside it for 8 s over
// its own connection. The download completes byte-exact, no faster than the
// carrier allows, and the interactive flow keeps answering, never waiting
// longer than interactiveStall for an answer.
func TestThrottledCarrierKeepsInteractiveFlowAnswering(t *testing.T) {
	const (
		rate = 125_000 // 1 Mbit/s
		size = 2 << 20 // 17 s at the rate
	)
	c := newCluster(t, clusterOpts{})
	relay, server := c.startRelay(t)
	for _, dir := range []faultrelay.Direction{faultrelay.Up, faultrelay.Down} {
		relay.SetShape(dir, faultrelay.Shape{Rate: rate})
	}
	bulk := fmt.Sprintf(`s=$(date +%%s%%N); %s; echo bulk_ms $(( ($(date +%%s%%N) - s) / 1000000 ))`,
		downloadJob(size, "", 2*time.Minute))
	interactive := c.roleJob("interactive", echoAddr, "8s", "200ms", "60s")
	p := c.startLauncher(t, server, "sh", "-c", "("+bulk+") & sleep 2; "+interactive+"; wait")
	waitExit(t, p, 2*time.Minute)
	out := p.Stdout()
	wantDownload(t, out, size)

	bulkTime := time.Duration(atoi(t, outputLine(t, out, "bulk_ms"))) * time.Millisecond
	if min := time.Duration(size) * time.Second / rate * 9 / 10; bulkTime < min {
		t.Fatalf("%d bytes downloaded in %v, faster than the carrier's %d B/s allow (%v): the throttle is not in the path", size, bulkTime, rate, min)
	}
	stats := fields(outputLine(t, out, "interactive"))
	rounds, p50, worst := atoi(t, stats["rounds"]), atoi(t, stats["p50_ms"]), atoi(t, stats["max_ms"])
	t.Logf("1 Mbit/s carrier: %d bytes in %v (%.0f B/s); interactive flow beside it: %d rounds, p50 %d ms, max %d ms (in order: %s)",
		size, bulkTime.Round(time.Millisecond), float64(size)/bulkTime.Seconds(), rounds, p50, worst, stats["rtts_ms"])
	if worst > interactiveStall.Milliseconds() {
		t.Errorf("an interactive answer took %d ms beside the download, want at most %v", worst, interactiveStall)
	}
}

// interactiveStall bounds one interactive round trip beside the bulk
// download. Both flows share one carrier, a single TCP stream, so an
// answer queues behind the download's data in flight, whose amount the
// download's own TCP window sets: at 1 Mbit/s every 125 kB of it is a
// second, and it grows while the download runs. The bound is below the
// 15 s pong timeout with a margin: an answer later than that would find
// the carrier's own pong as late, the product's threshold for a dead
// carrier. Measured here over the first 10 s of the download: p50
// 2.4-3.2 s, max 5-8 s. A longer download lets the queue grow further
// (18 s after 26 s of a 6 MiB download), which this test does not run.
const interactiveStall = 12 * time.Second

// fields parses "k=v k=v" into a map.
func fields(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("want a number, got %q", s)
	}
	return n
}
