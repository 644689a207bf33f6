package nsfaults

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
)

// TestTransferUnderNetemLossAndDelay: with netem on both ends of the
// node's link to the Ingress host (50 ms each way and 1% or 5% loss), a
// job's 8 MiB download completes byte-exact, the carrier keeps moving
// (no second without progress stretches past netemStall) and the
// launcher never reconnects. It skips where the kernel has no netem
// qdisc (sch_netem), saying so.
func TestTransferUnderNetemLossAndDelay(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	requireNetem(t, c)
	for _, loss := range []string{"1%", "5%"} {
		t.Run("loss"+strings.TrimSuffix(loss, "%"), func(t *testing.T) {
			c.netem(t, "delay", "50ms", "loss", loss)
			relay, server := c.startRelay(t) // no faults: it measures progress
			const size = 8 << 20
			before := metric(t, c.metrics(t), metricSessions)
			p := c.startLauncher(t, server, "sh", "-c", downloadJob(size, "", 3*time.Minute))
			stall := watchStall(t, relay, p)
			waitExit(t, p, 4*time.Minute)
			wantDownload(t, p.Stdout(), size)
			worst := stall()
			t.Logf("netem 50 ms each way, %s loss: longest time without progress %v", loss, worst.Round(time.Millisecond))
			if worst > netemStall {
				t.Errorf("the download made no progress for %v, want at most %v", worst, netemStall)
			}
			if after := metric(t, c.metrics(t), metricSessions); after != before+1 {
				t.Errorf("%s went from %v to %v for one launcher: it reconnected", metricSessions, before, after)
			}
		})
	}
}

// netemStall bounds a pause of the carrier under netem: the outer TCP
// recovers a lost segment in about one RTO (≥ 200 ms + 100 ms of delay);
// a few in a row back off to a couple of seconds.
const netemStall = 5 * time.Second

// requireNetem skips t unless a netem qdisc can be added in the node
// namespace.
func requireNetem(t *testing.T, c *cluster) {
	t.Helper()
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skipf("netem unavailable: tc (iproute2) is not installed: %v", err)
	}
	out, err := exec.Command("ip", "netns", "exec", c.Topo.Node, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms").CombinedOutput()
	if err != nil {
		t.Skipf("netem unavailable: tc qdisc add ... netem failed in a test namespace (%v: %s); the kernel lacks sch_netem (CONFIG_NET_SCH_NETEM) or cannot load it",
			err, strings.TrimSpace(string(out)))
	}
	c.tc(t, c.Topo.Node, "eth0", "del")
}

// netem puts netem with args on the node's eth0 (towards the Ingress)
// and on edge's eth1 (towards the node) until t ends.
func (c *cluster) netem(t *testing.T, args ...string) {
	t.Helper()
	for _, end := range []struct{ ns, dev string }{{c.Topo.Node, "eth0"}, {c.Topo.Edge, "eth1"}} {
		c.tc(t, end.ns, end.dev, "add", args...)
		t.Cleanup(func() { c.tc(t, end.ns, end.dev, "del") })
	}
}

// tc runs "tc qdisc OP dev DEV root [netem ARGS]" in ns.
func (c *cluster) tc(t *testing.T, ns, dev, op string, args ...string) {
	t.Helper()
	argv := []string{"tc", "qdisc", op, "dev", dev, "root"}
	if op != "del" {
		argv = append(append(argv, "netem"), args...)
	}
	if _, stderr, code := c.Topo.Run(t, ns, nstestRoot(), argv...); code != 0 {
		t.Fatalf("%s in %s: exit %d: %s", strings.Join(argv, " "), ns, code, stderr)
	}
}

// watchStall samples the relay's bytes towards the node every 100 ms
// until p exits and returns a function that waits for the watcher and
// gives the longest time without progress after the first byte.
func watchStall(t *testing.T, r *faultrelay.Relay, p interface{ Done() <-chan struct{} }) func() time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var worst time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		last, lastAt := int64(0), time.Time{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.Done():
				return
			case now := <-tick.C:
				n := r.Stats(faultrelay.Down).Bytes
				if n != last {
					last, lastAt = n, now
				} else if !lastAt.IsZero() {
					worst = max(worst, now.Sub(lastAt))
				}
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() time.Duration {
		wg.Wait()
		return worst
	}
}
