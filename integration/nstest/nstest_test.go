package nstest_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

func TestMain(m *testing.M) { nstest.Main(m) }

// cluster is one topology with the servers the smoke test talks to.
type cluster struct {
	topo    *nstest.Topology
	svcEcho *nstest.Proc // httpecho as root on ServiceIP:80
	podEcho *nstest.Proc // httpecho as nobody on PodIP:8080
	ingress *nstest.Ingress
	proxy   *nstest.Proxy
}

const nobody = "nobody"

// TestTopology builds a cluster and proves every path the namespace tier
// relies on, with a positive control beside each blocked one; then that
// teardown left nothing behind.
func TestTopology(t *testing.T) {
	nstest.Require(t)
	var prefix string
	var pids []int
	t.Run("cluster", func(t *testing.T) {
		c := startCluster(t)
		prefix = c.topo.Prefix
		pids = []int{c.svcEcho.Pid(), c.podEcho.Pid(), c.ingress.Proc.Pid(), c.proxy.Proc.Pid()}
		for _, tc := range []struct {
			name string
			fn   func(*testing.T, *cluster)
		}{
			{"pod reaches Service by IP", testServiceByIP},
			{"pod resolves and reaches Service by name", testServiceByName},
			{"pod downloads 1 MiB intact", testBytesIntact},
			{"pod TCP and UDP echo", testEchoRoles},
			{"node reaches edge but not the cluster", testNodeIsolated},
			{"edge does not forward", testEdgeNoForwarding},
			{"ingress proxies plain HTTP to pod", testIngressPlain},
			{"ingress proxies HTTPS to pod", testIngressTLS},
			{"ingress passes HTTP upgrades", testIngressUpgrade},
			{"proxy CONNECT with credentials only", testProxy},
			{"nobody has no capabilities", testNoCapabilities},
			{"process exit codes", testExitCodes},
		} {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, c) })
		}
	})
	t.Run("teardown left nothing", func(t *testing.T) {
		if prefix == "" {
			t.Skip("cluster was not built")
		}
		checkGone(t, prefix, pids)
	})
}

func startCluster(t *testing.T) *cluster {
	topo := nstest.NewTopology(t, nstest.Options{})
	c := &cluster{topo: topo}
	c.svcEcho = topo.StartRole(t, topo.Svc, "", "httpecho", ":80") // ServiceIP and SvcHostIP
	c.podEcho = topo.StartRole(t, topo.Pod, nobody, "httpecho", nstest.PodIP+":8080")
	topo.StartRole(t, topo.Pod, nobody, "tcpecho", nstest.PodIP+":7000")
	topo.StartRole(t, topo.Pod, nobody, "udpecho", nstest.PodIP+":7001")
	topo.WaitTCP(t, topo.Svc, nstest.ServiceIP+":80", 10*time.Second)
	topo.WaitTCP(t, topo.Pod, nstest.PodIP+":8080", 10*time.Second)
	topo.WaitTCP(t, topo.Pod, nstest.PodIP+":7000", 10*time.Second)
	topo.StartDNS(t, map[string]netip.Addr{
		"web.default.svc.cluster.local": netip.MustParseAddr(nstest.ServiceIP),
	})
	c.ingress = topo.StartIngress(t, nstest.IngressOpts{Upstream: nstest.PodIP + ":8080", IdleTimeout: 60 * time.Second})
	c.proxy = topo.StartProxy(t, "job", "s3cret")
	return c
}

// curl runs curl as nobody in ns and fails t unless it exits 0.
func curl(t *testing.T, c *cluster, ns string, args ...string) string {
	t.Helper()
	argv := append([]string{"curl", "-sS", "--max-time", "10"}, args...)
	out, stderr, code := c.topo.Run(t, ns, nstest.ProcOpts{User: nobody}, argv...)
	if code != 0 {
		t.Fatalf("%q in %s: exit %d: %s", argv, ns, code, stderr)
	}
	return out
}

// wantPeer checks that an httpecho body names host as the client.
func wantPeer(t *testing.T, body, host string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(body)
	if err != nil || ap.Addr().String() != host {
		t.Fatalf("httpecho saw client %q, want %s:PORT", body, host)
	}
}

func testServiceByIP(t *testing.T, c *cluster) {
	wantPeer(t, curl(t, c, c.topo.Pod, "http://"+nstest.ServiceIP+"/"), nstest.PodIP)
}

func testServiceByName(t *testing.T, c *cluster) {
	out, stderr, code := c.topo.Run(t, c.topo.Pod, nstest.ProcOpts{User: nobody}, "getent", "hosts", "web")
	if code != 0 {
		t.Fatalf("getent hosts web in pod: exit %d: %s", code, stderr)
	}
	if f := strings.Fields(out); len(f) < 2 || f[0] != nstest.ServiceIP || f[1] != "web.default.svc.cluster.local" {
		t.Fatalf("getent hosts web = %q, want %s web.default.svc.cluster.local", out, nstest.ServiceIP)
	}
	wantPeer(t, curl(t, c, c.topo.Pod, "http://web/"), nstest.PodIP)
}

func testBytesIntact(t *testing.T, c *cluster) {
	const n = 1 << 20
	body := curl(t, c, c.topo.Pod, "--output", "-", fmt.Sprintf("http://%s/bytes?n=%d", nstest.ServiceIP, n))
	if err := nstest.VerifyPattern(strings.NewReader(body), n); err != nil {
		t.Fatal(err)
	}
}

func testEchoRoles(t *testing.T, c *cluster) {
	for _, args := range [][]string{{"tcp", nstest.PodIP + ":7000"}, {"udp", nstest.PodIP + ":7001"}} {
		out, stderr, code := c.topo.RunRole(t, c.topo.Svc, nstest.ProcOpts{User: nobody}, "echocheck", args...)
		if code != 0 {
			t.Errorf("echocheck %s from svc: exit %d: %s%s", args, code, out, stderr)
		}
	}
}

func testNodeIsolated(t *testing.T, c *cluster) {
	tp := c.topo
	if !tp.CanDialTCP(t, tp.Node, nobody, nstest.EdgeNodeIP+":80", 5*time.Second) {
		t.Fatal("control: node cannot reach the edge at 198.18.0.1:80")
	}
	for _, addr := range []string{nstest.ServiceIP + ":80", nstest.PodIP + ":8080", nstest.SvcHostIP + ":80"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			if !tp.CanDialTCP(t, tp.Pod, nobody, addr, 5*time.Second) {
				t.Fatalf("control: %s is not reachable from the pod", addr)
			}
			if tp.CanDialTCP(t, tp.Node, nobody, addr, 2*time.Second) {
				t.Errorf("node reached cluster address %s directly", addr)
			}
		})
	}
}

func testEdgeNoForwarding(t *testing.T, c *cluster) {
	out, _, code := c.topo.Run(t, c.topo.Edge, nstest.ProcOpts{}, "cat", "/proc/sys/net/ipv4/ip_forward")
	if code != 0 || strings.TrimSpace(out) != "0" {
		t.Fatalf("edge ip_forward = %q (exit %d), want 0", out, code)
	}
}

func testIngressPlain(t *testing.T, c *cluster) {
	wantPeer(t, curl(t, c, c.topo.Node, "http://"+nstest.EdgeNodeIP+"/"), nstest.EdgeClusterIP)
}

func testIngressTLS(t *testing.T, c *cluster) {
	ca := c.ingress.CAFile
	wantPeer(t, curl(t, c, c.topo.Node, "--cacert", ca, "https://"+nstest.EdgeNodeIP+"/"), nstest.EdgeClusterIP)
	byName := curl(t, c, c.topo.Node, "--cacert", ca,
		"--resolve", nstest.IngressServerName+":443:"+nstest.EdgeNodeIP, "https://"+nstest.IngressServerName+"/")
	wantPeer(t, byName, nstest.EdgeClusterIP)
}

func testIngressUpgrade(t *testing.T, c *cluster) {
	for _, args := range [][]string{{c.ingress.PlainURL + "/"}, {c.ingress.URL + "/", c.ingress.CAFile}} {
		out, stderr, code := c.topo.RunRole(t, c.topo.Node, nstest.ProcOpts{User: nobody}, "upgrade", args...)
		if code != 0 {
			t.Errorf("upgrade through ingress %s: exit %d: %s%s", args[0], code, out, stderr)
		}
	}
}

func testProxy(t *testing.T, c *cluster) {
	via := curl(t, c, c.topo.Node, "--proxy", c.proxy.URL, "--cacert", c.ingress.CAFile, "https://"+nstest.EdgeNodeIP+"/")
	wantPeer(t, via, nstest.EdgeClusterIP)
	out, _, _ := c.topo.Run(t, c.topo.Node, nstest.ProcOpts{User: nobody}, "curl", "-sS", "--max-time", "10",
		"--proxy", "http://"+c.proxy.Addr, "--cacert", c.ingress.CAFile, "--output", "/dev/null",
		"--write-out", "%{http_connect}", "https://"+nstest.EdgeNodeIP+"/")
	if out != "407" {
		t.Fatalf("CONNECT without credentials answered %q, want 407", out)
	}
}

func testNoCapabilities(t *testing.T, c *cluster) {
	st := procStatus(t, c.podEcho.Pid())
	for key, want := range map[string]string{
		"Uid": "65534\t65534\t65534\t65534", "Gid": "65534\t65534\t65534\t65534", "Groups": "",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1",
	} {
		if st[key] != want {
			t.Errorf("pod httpecho %s = %q, want %q", key, st[key], want)
		}
	}
	if root := procStatus(t, c.svcEcho.Pid()); root["CapEff"] == "0000000000000000" {
		t.Error("control: the root-run svc httpecho has no capabilities either")
	}
}

// procStatus reads /proc/PID/status into a map.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		m[k] = strings.TrimSpace(v)
	}
	return m
}

func testExitCodes(t *testing.T, c *cluster) {
	if _, _, code := c.topo.Run(t, c.topo.Pod, nstest.ProcOpts{User: nobody}, "sh", "-c", "exit 42"); code != 42 {
		t.Errorf("Run exit code = %d, want 42", code)
	}
	p := c.topo.StartRole(t, c.topo.Pod, nobody, "tcpecho", nstest.PodIP+":7002")
	c.topo.WaitTCP(t, c.topo.Pod, nstest.PodIP+":7002", 10*time.Second)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(5 * time.Second); err != nil || code != 128+int(syscall.SIGTERM) {
		t.Errorf("tcpecho after SIGTERM: code %d, err %v; want %d", code, err, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(p.Stdout(), "tcpecho listening on "+nstest.PodIP+":7002") {
		t.Errorf("tcpecho stdout = %q", p.Stdout())
	}
}

// checkGone fails unless no namespace, /etc/netns directory or process of
// the torn-down topology remains.
func checkGone(t *testing.T, prefix string, pids []int) {
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, prefix) {
			t.Errorf("namespace left behind: %s", strings.TrimSpace(line))
		}
	}
	for _, pattern := range []string{"/run/netns/" + prefix + "*", "/etc/netns/" + prefix + "*"} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists (kill 0: %v)", pid, err)
		}
	}
}
