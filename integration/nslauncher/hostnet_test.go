package nslauncher

import (
	"net/netip"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const (
	// nodeServer is httpecho on the node's own address.
	nodeServer = nstest.NodeIP + ":7000"
	// nodeLoopbackPort is httpecho's port on the node's 127.0.0.1.
	nodeLoopbackPort = "7001"
	// hostLoopback stands for the node's 127.0.0.1 inside the job
	// (hostnat.LoopbackAddr), with --host-loopback only.
	hostLoopback = "169.254.64.2"
)

// TestHostNAT: the job reaches the node's network through the host NAT,
// its flows re-dialled from the node's own address; the node's loopback
// only with --host-loopback; nothing of the node with --host-network
// none, while the cluster still works.
func TestHostNAT(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.Topo.StartRole(t, c.Topo.Node, "", "httpecho", nodeServer)
	c.Topo.StartRole(t, c.Topo.Node, "", "httpecho", "127.0.0.1:"+nodeLoopbackPort)
	c.Topo.WaitTCP(t, c.Topo.Node, nodeServer, 10*time.Second)
	c.Topo.WaitTCP(t, c.Topo.Node, "127.0.0.1:"+nodeLoopbackPort, 10*time.Second)
	node := curlCheck("node", "http://"+nodeServer+"/")
	loopback := curlCheck("loopback", "http://"+hostLoopback+":"+nodeLoopbackPort+"/")
	service := curlCheck("service", "http://"+nstest.ServiceIP+"/")

	t.Run("nat", func(t *testing.T) {
		res := c.runChecks(t, launch{}, node, loopback)
		wantClient(t, res, "node", nstest.NodeIP)
		wantFailed(t, res, "loopback")
	})
	t.Run("host-loopback", func(t *testing.T) {
		res := c.runChecks(t, launch{flags: []string{"--host-loopback"}}, loopback, node)
		wantClient(t, res, "loopback", "127.0.0.1")
		wantClient(t, res, "node", nstest.NodeIP)
	})
	t.Run("host-network-none", func(t *testing.T) {
		res := c.runChecks(t, launch{flags: []string{"--host-network", "none"}}, node, service)
		wantFailed(t, res, "node")
		wantClient(t, res, "service", nstest.PodIP)
	})
}

// runChecks runs checkJob(checks...) under the launcher, which must exit
// 0, and returns the job's report.
func (c *cluster) runChecks(t *testing.T, l launch, checks ...check) map[string]result {
	t.Helper()
	stdout, stderr, code := c.run(t, l, checkJob(checks...)...)
	if code != 0 {
		t.Fatalf("launcher exited %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("job report:\n%s\nlauncher stderr:\n%s", stdout, stderr)
		}
	})
	return parseChecks(stdout)
}

// TestPublish: --publish forwards a port of the node's loopback to the
// job's port.
func TestPublish(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const published = "127.0.0.1:18080"
	url := "http://" + published + "/"
	if c.Topo.CanDialTCP(t, c.Topo.Node, "", published, 100*time.Millisecond) {
		t.Fatalf("%s accepts connections before the launcher runs", published)
	}
	p := c.start(t, launch{flags: []string{"--publish", published + ":" + jobTCPPort}},
		c.roleJob("httpecho", "0.0.0.0:"+jobTCPPort)...)
	waitOutput(t, p, 30*time.Second, "httpecho listening on")
	body := c.retryRun(t, c.Topo.Node, 10*time.Second, "curl", "-sS", "--max-time", "3", url)
	if _, err := netip.ParseAddrPort(body); err != nil {
		t.Errorf("GET %s from the node: %q, want httpecho's answer (the client address)", url, body)
	}
	t.Logf("the job saw the published connection from %s", body)
}
