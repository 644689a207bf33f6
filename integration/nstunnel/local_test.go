package nstunnel

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// Local ends of TestLocalForwards's tunnel, in the node namespace.
const (
	byIPPort     = "18080" // -L to the Service by IP
	byNamePort   = "18081" // -L to the Service by its cluster name
	metadataPort = "18082" // -L to the metadata address: denied
	loopNamePort = "18083" // -L to a name that resolves to loopback: denied
	dnsPort      = "15353" // -L to the cluster DNS, UDP
	socksPort    = "11080"
	// loopName resolves to 127.0.0.1 in the cluster's DNS.
	loopName = "loop.default.svc.cluster.local"
	// podLoopbackAddr is served by httpecho on the pod's loopback, so a
	// policy that let loopName through would be seen succeeding.
	podLoopbackAddr = "127.0.0.1:8080"
)

// TestLocalForwards: one "meshlaunch tunnel" as nobody in node forwards
// local ports to the Service by IP and by cluster name (resolved by the
// sidecar: node cannot resolve it), carries DNS over UDP, runs a SOCKS5
// proxy, and refuses, fast and with the sidecar's reason, a denied
// destination and a name that resolves to loopback, while its allowed
// forwards work in the same run. --stdio reaches the Service too.
func TestLocalForwards(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{records: map[string]netip.Addr{loopName: netip.MustParseAddr("127.0.0.1")}})
	c.Topo.StartRole(t, c.Topo.Pod, nobody, "httpecho", podLoopbackAddr)
	c.Topo.WaitTCP(t, c.Topo.Pod, podLoopbackAddr, 10*time.Second)
	p := c.startTunnel(t, "",
		"-L", byIPPort+":"+nstest.ServiceIP+":80",
		"-L", "127.0.0.1:"+byNamePort+":"+nstest.WebName+":80",
		"-L", "127.0.0.1:"+dnsPort+":"+nstest.ServiceIP+":53/udp",
		"-L", metadataPort+":169.254.169.254:80",
		"-L", loopNamePort+":"+loopName+":8080",
		"--socks", "127.0.0.1:"+socksPort)
	c.Topo.WaitTCP(t, c.Topo.Node, "127.0.0.1:"+socksPort, 10*time.Second) // the last listener opened
	local := func(port string) string { return "http://127.0.0.1:" + port + "/" }

	t.Run("service-by-ip", func(t *testing.T) {
		body := c.retryUntil(t, c.Topo.Node, 10*time.Second, anyOutput, curl(local(byIPPort))...)
		wantClientHost(t, "-L to "+nstest.ServiceIP+":80", body, nstest.PodIP)
	})
	t.Run("service-by-name", func(t *testing.T) {
		body := c.retryUntil(t, c.Topo.Node, 10*time.Second, anyOutput, curl(local(byNamePort))...)
		wantClientHost(t, "-L to "+nstest.WebName+":80", body, nstest.PodIP)
	})
	t.Run("dns-over-udp", func(t *testing.T) {
		out := c.retryUntil(t, c.Topo.Node, 10*time.Second, anyOutput,
			"dig", "@127.0.0.1", "-p", dnsPort, nstest.WebName, "+short", "+time=2", "+tries=2")
		if got := strings.TrimSpace(out); got != nstest.ServiceIP {
			t.Errorf("dig %s through -L %s/udp answered %q, want %s", nstest.WebName, dnsPort, got, nstest.ServiceIP)
		}
	})
	t.Run("socks5", func(t *testing.T) {
		body := c.retryUntil(t, c.Topo.Node, 10*time.Second, anyOutput,
			curl("http://"+nstest.WebName+"/", "--socks5-hostname", "127.0.0.1:"+socksPort)...)
		wantClientHost(t, "SOCKS5 CONNECT to "+nstest.WebName, body, nstest.PodIP)
		body = c.retryUntil(t, c.Topo.Node, 10*time.Second, anyOutput,
			curl("http://"+nstest.ServiceIP+"/", "--socks5", "127.0.0.1:"+socksPort)...)
		wantClientHost(t, "SOCKS5 CONNECT to "+nstest.ServiceIP, body, nstest.PodIP)
	})
	t.Run("stdio", func(t *testing.T) {
		opts := asNobody(20 * time.Second)
		opts.Stdin = strings.NewReader("GET / HTTP/1.0\r\nHost: web\r\n\r\n")
		stdout, stderr, code := c.Topo.Run(t, c.Topo.Node, opts, c.tunnelArgv("", "--stdio", nstest.ServiceIP+":80")...)
		if code != 0 {
			t.Fatalf("tunnel --stdio exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		head, body, _ := strings.Cut(stdout, "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.0 200 ") && !strings.HasPrefix(head, "HTTP/1.1 200 ") {
			t.Fatalf("tunnel --stdio: response %q, want a 200", stdout)
		}
		wantClientHost(t, "--stdio to "+nstest.ServiceIP+":80", body, nstest.PodIP)
	})
	t.Run("denied-metadata", func(t *testing.T) {
		c.wantRefused(t, p, local(byIPPort), local(metadataPort), "169.254.169.254:80", "169.254.169.254:80", "metadata")
	})
	t.Run("denied-name-to-loopback", func(t *testing.T) {
		c.wantRefused(t, p, local(byNamePort), local(loopNamePort), loopName+":8080", podLoopbackAddr, "loopback")
	})
}

// wantRefused checks, through the running tunnel p, that url (forwarded
// to dst) is reset within 3 s and that p logs the sidecar's 403 naming
// the resolved address and reason; control, another forward of p, must
// work right before.
func (c *cluster) wantRefused(t *testing.T, p *nstest.Proc, control, url, dst, resolved, reason string) {
	t.Helper()
	if _, stderr, code := c.Topo.Run(t, c.Topo.Node, asNobody(0), curl(control)...); code != 0 {
		t.Fatalf("positive control %s: curl exit %d: %s", control, code, stderr)
	}
	start := time.Now()
	stdout, _, code := c.Topo.Run(t, c.Topo.Node, asNobody(0), curl(url)...)
	elapsed := time.Since(start)
	if code == 0 {
		t.Fatalf("%s (to %s) answered %q, want a refusal", url, dst, stdout)
	}
	if elapsed > 3*time.Second {
		t.Errorf("%s (to %s) took %v to fail, want a reset at once", url, dst, elapsed)
	}
	rec := waitLog(t, p, 5*time.Second, "the sidecar's refusal of "+dst, func(r logRecord) bool {
		return r.str("msg") == "tunnel: the sidecar refused the connection" && r.str("dst") == dst
	})
	if status, _ := rec["status"].(float64); status != 403 {
		t.Errorf("refusal of %s: status %v, want 403: %v", dst, rec["status"], rec)
	}
	want := "tcp to " + dst + " (" + resolved + ") denied by the sidecar's egress policy: " + reason
	if got := rec.str("reason"); got != want {
		t.Errorf("refusal of %s: reason %q, want %q", dst, got, want)
	}
	t.Logf("%s refused after %v (curl exit %d): %s", dst, elapsed.Round(time.Millisecond), code, rec.str("reason"))
}
