package nslauncher

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// TestThroughHTTPProxy: with HTTPS_PROXY set, the launcher reaches the
// Ingress through an authenticating HTTP proxy (CONNECT), and the job
// reaches the Service as without it; with a wrong proxy password it
// fails, says that the proxy refused, and does not show the password.
func TestThroughHTTPProxy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	proxy := c.Topo.StartProxy(t, "job", "s3cret")
	connect := "CONNECT " + nstest.EdgeNodeIP + ":443"
	if log := proxy.Proc.Stderr(); strings.Contains(log, connect) {
		t.Fatalf("tinyproxy logged %q before the launcher ran:\n%s", connect, log)
	}

	res := c.runChecks(t, launch{env: []string{"HTTPS_PROXY=" + proxy.URL}},
		curlCheck("byip", "http://"+nstest.ServiceIP+"/"))
	wantClient(t, res, "byip", nstest.PodIP)
	if log := proxy.Proc.Stdout() + proxy.Proc.Stderr(); !strings.Contains(log, connect) {
		t.Errorf("tinyproxy logged no %q: the launcher went around the proxy\n%s", connect, log)
	}

	bad, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	const wrongPass = "n0t-th3-pa55"
	bad.User = url.UserPassword(bad.User.Username(), wrongPass)
	_, stderr, code := c.run(t, launch{
		env:     []string{"HTTPS_PROXY=" + bad.String()},
		flags:   []string{"--wait", "2s"},
		timeout: 20 * time.Second,
	}, "true")
	if code == 0 {
		t.Fatalf("launcher with a wrong proxy password exited 0\nstderr:\n%s", stderr)
	}
	// 407 is the proxy's status for refused credentials; tinyproxy before
	// 1.11.2 (Debian 12 ships 1.11.1) answers 401 instead
	// (tinyproxy/tinyproxy#532).
	wantMention(t, stderr, "refused CONNECT")
	if !strings.Contains(stderr, "407") && !strings.Contains(stderr, "401") {
		t.Errorf("message does not give the proxy's status (407, or 401 from old tinyproxy):\n%s", stderr)
	}
	if strings.Contains(stderr, wrongPass) {
		t.Errorf("the launcher's messages show the proxy password:\n%s", stderr)
	}
}
