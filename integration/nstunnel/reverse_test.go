package nstunnel

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// Local services of the -R tests, on the node's loopback.
const (
	nodeHTTP      = "127.0.0.1:7000" // httpecho
	nodeProxyLine = "127.0.0.1:7001" // proxyline
	nodeUDP       = "127.0.0.1:7002" // udpecho
)

// podURL is the exposed TCP port on the pod IP, as the cluster sees it.
var podURL = "http://" + nstest.PodIP + ":" + exposedTCP + "/"

// registered matches the tunnel's log of a registered -R port.
func registered(port string) func(logRecord) bool {
	return func(r logRecord) bool {
		n, _ := r["pod_port"].(float64)
		return r.str("msg") == "tunnel: reverse port registered" && fmt.Sprint(n) == port
	}
}

// TestReverseForwards: -R makes a service on the node's loopback
// reachable from the cluster at the pod's exposed ports, TCP and UDP; a
// port the sidecar does not expose is refused with the ports it allows;
// a second tunnel registering the same port takes it over, and with
// --proxy-protocol its service learns the cluster client's address.
func TestReverseForwards(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	c.Topo.StartRole(t, c.Topo.Node, nobody, "httpecho", nodeHTTP)
	c.Topo.StartRole(t, c.Topo.Node, nobody, "udpecho", nodeUDP)
	c.Topo.WaitTCP(t, c.Topo.Node, nodeHTTP, 10*time.Second)
	first := c.startTunnel(t, "", "-R", exposedTCP+":"+nodeHTTP, "-R", exposedUDP+":"+nodeUDP+"/udp")
	waitLog(t, first, 15*time.Second, "-R "+exposedTCP+" registered", registered(exposedTCP))
	waitLog(t, first, 15*time.Second, "-R "+exposedUDP+"/udp registered", registered(exposedUDP))

	t.Run("tcp", func(t *testing.T) {
		body := c.retryUntil(t, c.Topo.Svc, 10*time.Second, anyOutput, curl(podURL)...)
		// httpecho on the node sees the tunnel client dial it locally.
		wantClientHost(t, "GET "+podURL+" from svc", body, "127.0.0.1")
	})
	t.Run("udp", func(t *testing.T) {
		addr := nstest.PodIP + ":" + exposedUDP
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, stderr, code := c.Topo.RunRole(t, c.Topo.Svc, nstest.ProcOpts{User: nobody}, "echocheck", "udp", addr)
			if code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("UDP echo from svc through -R %s/udp: exit %d: %s", exposedUDP, code, stderr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	t.Run("port-not-exposed", func(t *testing.T) {
		// The positive control is "tcp" above: the same -R form on 9000.
		start := time.Now()
		opts := asNobody(20 * time.Second)
		_, stderr, code := c.Topo.Run(t, c.Topo.Node, opts, c.tunnelArgv("", "-R", "9999:"+nodeHTTP)...)
		elapsed := time.Since(start)
		if code == 0 {
			t.Fatalf("tunnel -R 9999 exited 0, want a refusal\nstderr:\n%s", stderr)
		}
		if elapsed > 10*time.Second {
			t.Errorf("tunnel -R 9999 took %v to give up, want a refusal without retries", elapsed)
		}
		for _, want := range []string{"9999/tcp", "not exposed", "9000/tcp", "9001/udp", "403"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("tunnel -R 9999: message does not mention %q:\n%s", want, stderr)
			}
		}
		t.Logf("-R 9999: exit %d after %v", code, elapsed.Round(time.Millisecond))
	})
	t.Run("replaced-with-proxy-protocol", func(t *testing.T) {
		pl := c.startRole(t, c.Topo.Node, "proxyline", nodeProxyLine)
		waitStdout(t, pl, 10*time.Second, "proxyline listening")
		second := c.startTunnel(t, "", "--proxy-protocol", "-R", exposedTCP+":"+nodeProxyLine)
		waitLog(t, second, 15*time.Second, "-R "+exposedTCP+" registered", registered(exposedTCP))
		// The older registration is closed and its tunnel gives up.
		code, err := first.Wait(10 * time.Second)
		if err != nil {
			t.Fatalf("the first tunnel still runs after another registered its port: %v", err)
		}
		if code == 0 || !strings.Contains(first.Stderr(), "another client registered the same pod port") {
			t.Errorf("first tunnel: exit %d, want non-zero naming the takeover\nstderr:\n%s", code, first.Stderr())
		}
		body := c.retryUntil(t, c.Topo.Svc, 10*time.Second, func(s string) bool { return strings.HasPrefix(s, "PROXY ") },
			curl(podURL)...)
		f := strings.Fields(body)
		if len(f) != 6 || f[1] != "TCP4" || f[2] != nstest.SvcHostIP || f[3] != nstest.PodIP || f[5] != exposedTCP {
			t.Errorf("PROXY header %q, want PROXY TCP4 %s %s CPORT %s", body, nstest.SvcHostIP, nstest.PodIP, exposedTCP)
		}
	})
}
