package nslauncher

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// TestJobReachesServiceByIPAndName: the job, as the launcher's own uid,
// reaches the Service by IP from the pod IP, and by its short name
// through the in-tunnel DNS and the pod's search path.
func TestJobReachesServiceByIPAndName(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	stdout, stderr, code := c.run(t, launch{}, checkJob(
		check{"uid", "id -u"},
		curlCheck("byip", "http://"+nstest.ServiceIP+"/"),
		curlCheck("byname", "http://web/"),
		check{"getent", "getent hosts " + nstest.WebName},
		check{"resolv", "cat /etc/resolv.conf"},
	)...)
	if code != 0 {
		t.Fatalf("launcher exited %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := parseChecks(stdout)
	if uid, ok := wantOK(t, res, "uid"); ok && uid != nobodyUID {
		t.Errorf("the job runs as uid %s, want %s (the launcher's)", uid, nobodyUID)
	}
	wantClient(t, res, "byip", nstest.PodIP)
	wantClient(t, res, "byname", nstest.PodIP)
	if out, ok := wantOK(t, res, "getent"); ok {
		if f := strings.Fields(out); len(f) < 2 || f[0] != nstest.ServiceIP || f[1] != nstest.WebName {
			t.Errorf("getent hosts %s = %q, want %s %s", nstest.WebName, out, nstest.ServiceIP, nstest.WebName)
		}
	}
	if out, ok := wantOK(t, res, "resolv"); ok {
		for _, want := range []string{"nameserver 169.254.64.1", "search default.svc.cluster.local", "ndots:5"} {
			if !strings.Contains(out, want) {
				t.Errorf("the job's resolv.conf %q lacks %q", out, want)
			}
		}
	}
	if t.Failed() {
		t.Logf("launcher stderr:\n%s", stderr)
	}
}

// TestClusterReachesJobAtPodIP: a client in the cluster reaches the job's
// TCP and UDP servers at the pod IP, and the job sees the client's own
// address.
func TestClusterReachesJobAtPodIP(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	job := []string{"sh", "-c",
		`env ` + nstest.RoleEnv + `=udpecho "$1" 0.0.0.0:` + jobUDPPort + ` & exec env ` + nstest.RoleEnv + `=httpecho "$1" 0.0.0.0:` + jobTCPPort,
		"sh", c.Roles}
	p := c.start(t, launch{}, job...)
	waitOutput(t, p, 30*time.Second, "httpecho listening on", "udpecho listening on")

	url := "http://" + nstest.PodIP + ":" + jobTCPPort + "/"
	body := c.retryRun(t, c.Topo.Svc, 10*time.Second, "curl", "-sS", "--max-time", "3", url)
	if ap, err := netip.ParseAddrPort(body); err != nil || ap.Addr().String() != nstest.SvcHostIP {
		t.Errorf("GET %s from svc: the job saw client %q, want %s:PORT", url, body, nstest.SvcHostIP)
	}
	_, stderr, code := c.Topo.RunRole(t, c.Topo.Svc, nstest.ProcOpts{}, "echocheck", "udp", nstest.PodIP+":"+jobUDPPort)
	if code != 0 {
		t.Errorf("UDP echo from svc to the job at %s:%s: exit %d: %s", nstest.PodIP, jobUDPPort, code, stderr)
	}
}

// retryRun runs argv in ns as root until it exits 0 or timeout passes,
// and returns its stdout.
func (c *cluster) retryRun(t *testing.T, ns string, timeout time.Duration, argv ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		stdout, stderr, code := c.Topo.Run(t, ns, nstest.ProcOpts{Timeout: timeout}, argv...)
		if code == 0 {
			return stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q in %s: exit %d after retrying for %v: %s", argv, ns, code, timeout, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
