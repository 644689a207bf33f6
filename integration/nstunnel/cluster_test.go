package nstunnel

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const (
	nobody = "nobody"
	// sidecarAddr is where the sidecar listens and nginx proxies to.
	sidecarAddr = nstest.PodIP + ":8080"
	// webName resolves to ServiceIP in the cluster's DNS (dnsmasq in svc);
	// nothing in the node namespace can resolve it.
	webName = "web.default.svc.cluster.local"
	// Ports the sidecar exposes, the only ones -R may use.
	exposedTCP = "9000"
	exposedUDP = "9001"
)

// cluster is one topology with a ready sidecar: httpecho on the Service
// (ServiceIP:80, root in svc), dnsmasq naming it webName, nginx as the
// Ingress to sidecarAddr, "meshlaunch sidecar" as nobody in pod exposing
// 9000/tcp and 9001/udp, and a directory every user can read with the
// binaries and the secret.
type cluster struct {
	topo    *nstest.Topology
	ingress *nstest.Ingress
	sidecar *nstest.Proc
	dir     string // 0755, removed at cleanup
	bin     string // meshlaunch
	roles   string // the test binary: $NSTUNNEL_ROLE picks the role
	token   string // the shared secret's file
}

// clusterOpts changes the cluster; the zero value is the layout above.
type clusterOpts struct {
	// records are extra DNS names of the cluster, besides webName.
	records map[string]netip.Addr
	// loopbackSAN adds 127.0.0.1 to the Ingress certificate, so that a
	// client in node can verify it through a relay on its loopback.
	loopbackSAN bool
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	topo := nstest.NewTopology(t, nstest.Options{}) // skips unless root
	dir := sharedDir(t)
	c := &cluster{topo: topo, dir: dir}
	c.bin = install(t, dir, "meshlaunch", meshlaunchBin)
	c.roles = install(t, dir, "nstunnel-roles", testBin)
	c.token = c.newToken(t, "token")
	topo.StartRole(t, topo.Svc, "", "httpecho", nstest.ServiceIP+":80")
	records := map[string]netip.Addr{webName: netip.MustParseAddr(nstest.ServiceIP)}
	maps.Copy(records, o.records)
	topo.StartDNS(t, records)
	ingOpts := nstest.IngressOpts{Upstream: sidecarAddr}
	if o.loopbackSAN {
		certs, err := nstest.GenerateCerts(sharedDir(t), nstest.IngressServerName,
			netip.MustParseAddr(nstest.EdgeNodeIP), netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		ingOpts.Certs = certs
	}
	c.ingress = topo.StartIngress(t, ingOpts)
	topo.WaitTCP(t, topo.Svc, nstest.ServiceIP+":80", 10*time.Second)
	c.sidecar = topo.Start(t, topo.Pod, nstest.ProcOpts{User: nobody}, c.bin, "--log-level", "debug", "sidecar",
		"--listen", sidecarAddr, "--token-file", c.token, "--pod-ip", nstest.PodIP,
		"--route", nstest.ServiceCIDR, "--expose", exposedTCP, "--expose", exposedUDP+"/udp")
	c.waitReady(t, 15*time.Second)
	return c
}

// newToken writes a new secret from "meshlaunch token" into the cluster's
// directory, readable by every user, and returns the file's path.
func (c *cluster) newToken(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command(c.bin, "token").Output()
	if err != nil {
		t.Fatalf("meshlaunch token: %v", err)
	}
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitReady polls the sidecar's /readyz from the node through the
// Ingress, the tunnel's own path, until it answers 200.
func (c *cluster) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	tr := &http.Transport{
		DialContext:       nstest.DialerIn(t, c.topo.Node),
		TLSClientConfig:   &tls.Config{RootCAs: c.ingress.Certs.CAPool()},
		DisableKeepAlives: true, // no connection outlives a request
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	url := strings.Replace(c.ingress.URL, "wss://", "https://", 1) + "/readyz"
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-c.sidecar.Done():
			t.Fatalf("sidecar exited before it was ready:\n%s", c.sidecar.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar not ready at %s within %v (last: %v)", url, timeout, statusOrErr(resp, err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func statusOrErr(resp *http.Response, err error) any {
	if err != nil {
		return err
	}
	return resp.Status
}

// sharedDir is a directory every user can read and traverse, removed at
// t's cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nstunnel-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tunnelArgv is "meshlaunch tunnel" against server (the Ingress when "")
// with the cluster's CA and secret, logging JSON, then args.
func (c *cluster) tunnelArgv(server string, args ...string) []string {
	if server == "" {
		server = c.ingress.URL
	}
	argv := []string{c.bin, "--log-format", "json", "tunnel", "--server", server,
		"--ca-file", c.ingress.CAFile, "--token-file", c.token}
	return append(argv, args...)
}

// asNobody runs a process as nobody with no capabilities, without the
// test host's proxy settings, bounded by timeout when run to completion.
func asNobody(timeout time.Duration) nstest.ProcOpts {
	env := []string{"HOME=/tmp", "GORACE=atexit_sleep_ms=0"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	return nstest.ProcOpts{User: nobody, Env: env, Timeout: timeout}
}

// startTunnel runs "meshlaunch tunnel" in node as nobody in the
// background; cleanup stops it.
func (c *cluster) startTunnel(t *testing.T, server string, args ...string) *nstest.Proc {
	t.Helper()
	return c.topo.Start(t, c.topo.Node, asNobody(0), c.tunnelArgv(server, args...)...)
}

// startRole runs one of this package's roles in ns as nobody.
func (c *cluster) startRole(t *testing.T, ns, role string, args ...string) *nstest.Proc {
	t.Helper()
	opts := asNobody(0)
	opts.Env = append(opts.Env, roleEnv+"="+role)
	return c.topo.Start(t, ns, opts, append([]string{c.roles}, args...)...)
}

// logRecord is one JSON log line of meshlaunch.
type logRecord map[string]any

func (r logRecord) str(key string) string {
	s, _ := r[key].(string)
	return s
}

// logRecords parses meshlaunch's JSON log lines; other lines are skipped.
func logRecords(stderr string) []logRecord {
	var out []logRecord
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r logRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// waitLog waits until p has logged a record that match accepts and
// returns it; it fails t if p exits first or timeout passes.
func waitLog(t *testing.T, p *nstest.Proc, timeout time.Duration, what string, match func(logRecord) bool) logRecord {
	t.Helper()
	return waitLogN(t, p, timeout, 1, what, match)
}

// waitLogN waits until p has logged n records that match accepts and
// returns the n-th; it fails t if p exits first or timeout passes.
func waitLogN(t *testing.T, p *nstest.Proc, timeout time.Duration, n int, what string, match func(logRecord) bool) logRecord {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		seen := 0
		for _, r := range logRecords(p.Stderr()) {
			if match(r) {
				if seen++; seen == n {
					return r
				}
			}
		}
		select {
		case <-p.Done():
			code, _ := p.Wait(time.Second)
			t.Fatalf("%s exited (%d) before logging %s\nstderr:\n%s", p.Name(), code, what, p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s logged no %s within %v\nstderr:\n%s", p.Name(), what, timeout, p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// msgIs matches log records with message msg.
func msgIs(msg string) func(logRecord) bool {
	return func(r logRecord) bool { return r.str("msg") == msg }
}

// waitStdout waits until p's stdout holds want and fails t if p exits
// first or timeout passes.
func waitStdout(t *testing.T, p *nstest.Proc, timeout time.Duration, want string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := p.Stdout()
		if strings.Contains(out, want) {
			return out
		}
		select {
		case <-p.Done():
			code, _ := p.Wait(time.Second)
			t.Fatalf("%s exited (%d) before printing %q\nstdout:\n%s\nstderr:\n%s", p.Name(), code, want, out, p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no %q within %v\nstdout:\n%s\nstderr:\n%s", p.Name(), want, timeout, out, p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// retryUntil runs argv in ns as nobody until ok accepts its stdout (after
// exit 0), and fails t after timeout; it returns that stdout.
func (c *cluster) retryUntil(t *testing.T, ns string, timeout time.Duration, ok func(string) bool, argv ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		stdout, stderr, code := c.topo.Run(t, ns, asNobody(timeout), argv...)
		if code == 0 && ok(stdout) {
			return stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q in %s: exit %d, stdout %q after retrying for %v: %s", argv, ns, code, stdout, timeout, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// anyOutput accepts every stdout.
func anyOutput(string) bool { return true }

// curl is a bounded curl of url with extra flags before it.
func curl(url string, flags ...string) []string {
	return append(append([]string{"curl", "-sS", "--connect-timeout", "3", "--max-time", "5"}, flags...), url)
}

// wantClientHost checks that body, an httpecho answer, names a client at
// host.
func wantClientHost(t *testing.T, what, body, host string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(strings.TrimSpace(body))
	if err != nil || ap.Addr().String() != host {
		t.Errorf("%s: httpecho saw client %q, want %s:PORT", what, body, host)
	}
}
