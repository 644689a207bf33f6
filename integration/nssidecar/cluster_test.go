package nssidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

func TestMain(m *testing.M) { nstest.Main(m) }

const (
	nobody = "nobody"
	// sidecarAddr is where the sidecar listens and nginx proxies to.
	sidecarAddr = nstest.PodIP + ":8080"
	// webName resolves to ServiceIP in the cluster's DNS.
	webName = "web.default.svc.cluster.local"
	// grace is the sidecar's --shutdown-grace in every test.
	grace = 3 * time.Second
)

// serviceURL is httpecho on the Service, which answers the client address.
var serviceURL = "http://" + nstest.ServiceIP + "/"

// cluster is one topology around the sidecar: httpecho on the Service
// (ServiceIP:80, as root in svc), dnsmasq naming it webName, nginx as the
// Ingress to sidecarAddr, and a directory user nobody can read holding the
// meshlaunch binary and the token file.
type cluster struct {
	topo    *nstest.Topology
	ingress *nstest.Ingress
	bin     string       // meshlaunch, executable by nobody
	token   string       // the shared secret's file, readable by nobody
	pod     *http.Client // requests from inside the pod namespace
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	topo := nstest.NewTopology(t, nstest.Options{})
	dir := sharedDir(t)
	c := &cluster{topo: topo, bin: installMeshlaunch(t, dir), token: filepath.Join(dir, "token")}
	if err := os.WriteFile(c.token, []byte(meshtest.Secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	topo.StartRole(t, topo.Svc, "", "httpecho", nstest.ServiceIP+":80")
	topo.StartDNS(t, map[string]netip.Addr{webName: netip.MustParseAddr(nstest.ServiceIP)})
	c.ingress = topo.StartIngress(t, nstest.IngressOpts{Upstream: sidecarAddr})
	topo.WaitTCP(t, topo.Svc, nstest.ServiceIP+":80", 10*time.Second)
	c.pod = httpClient(t, nstest.DialerIn(t, topo.Pod))
	return c
}

// sidecarArgs is the command line of every test's sidecar; extra flags
// are appended.
func (c *cluster) sidecarArgs(extra ...string) []string {
	return append([]string{c.bin, "--log-level", "debug", "sidecar",
		"--listen", sidecarAddr, "--token-file", c.token, "--pod-ip", nstest.PodIP,
		"--route", nstest.ServiceCIDR, "--route", nstest.ClusterCIDR,
		"--expose", "9000", "--expose", "9001/udp",
		"--shutdown-grace", grace.String()}, extra...)
}

// startSidecar runs the sidecar in pod as nobody with no capabilities
// and waits until it is ready.
func (c *cluster) startSidecar(t *testing.T, extra ...string) *nstest.Proc {
	t.Helper()
	p := c.topo.Start(t, c.topo.Pod, nstest.ProcOpts{User: nobody}, c.sidecarArgs(extra...)...)
	c.waitReadyz(t, p, http.StatusOK, 15*time.Second)
	return p
}

// waitReadyz polls /readyz until it answers want; it fails t if the
// sidecar exits first or timeout passes.
func (c *cluster) waitReadyz(t *testing.T, p *nstest.Proc, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := fetch(c.pod, "http://"+sidecarAddr+"/readyz")
		if err == nil && code == want {
			return
		}
		select {
		case <-p.Done():
			t.Fatalf("sidecar exited while waiting for /readyz %d:\n%s", want, p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer %d within %v (last: %d %q, %v)", want, timeout, code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric returns the value of one series of the sidecar's /metrics, as
// the exposition format writes it (name{labels}), or 0 if it is absent.
func (c *cluster) metric(t *testing.T, series string) float64 {
	t.Helper()
	body := mustGet(t, c.pod, "http://"+sidecarAddr+"/metrics")
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

func deniedSeries(reason string) string {
	return `meshlaunch_flows_denied_total{reason="` + reason + `"}`
}

// startJob joins meshtest's in-process job to the sidecar through the
// Ingress (wss, verified against its CA), dialling from the node; mod
// adjusts the client further. It does not wait: see Job.WaitReady.
func (c *cluster) startJob(t *testing.T, mod func(*wsproxy.ClientConfig)) *meshtest.Job {
	t.Helper()
	u, err := wsproxy.ParseServerURL(c.ingress.URL + meshapi.MeshPath)
	if err != nil {
		t.Fatal(err)
	}
	dial := nstest.DialerIn(t, c.topo.Node)
	return meshtest.StartJob(t, meshtest.JobOptions{URL: u, Client: func(cc *wsproxy.ClientConfig) {
		cc.TLS.CAFile = c.ingress.CAFile
		cc.DialContext = dial
		if mod != nil {
			mod(cc)
		}
	}})
}

// jobResolver asks the sidecar's in-tunnel DNS, through the job's stack.
func jobResolver(job *meshtest.Job) *net.Resolver {
	dns := netip.AddrPortFrom(meshapi.DefaultServiceAddr, 53).String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return job.Stack.DialContext(ctx, network, dns)
	}}
}

// jobHTTP is an HTTP client whose connections are the job's: opened in
// its stack, names resolved by jobResolver (as fully qualified names, so
// that the test host's resolv.conf search list plays no part).
func jobHTTP(t *testing.T, job *meshtest.Job) *http.Client {
	r := jobResolver(job)
	return httpClient(t, func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err != nil {
			ips, err := r.LookupNetIP(ctx, "ip4", strings.TrimSuffix(host, ".")+".")
			if err != nil {
				return nil, err
			}
			addr = net.JoinHostPort(ips[0].String(), port)
		}
		return job.Stack.DialContext(ctx, network, addr)
	})
}

// httpClient makes one connection per request (no idle connections, so
// no goroutines outlive a request) and bounds each request to 5 s.
func httpClient(t *testing.T, dial func(context.Context, string, string) (net.Conn, error)) *http.Client {
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// fetch GETs url and returns the status and body.
func fetch(client *http.Client, url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// mustGet fetches url and fails t unless it answers 200.
func mustGet(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	code, body, err := fetch(client, url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %q", url, code, body)
	}
	return body
}

// wantPeer checks that an httpecho body names host as the client.
func wantPeer(t *testing.T, body, host string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(body)
	if err != nil || ap.Addr().String() != host {
		t.Fatalf("httpecho saw client %q, want %s:PORT", body, host)
	}
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The meshlaunch binary is built once per test binary. The built file is
// unlinked at once and kept open, so that nothing is left behind however
// the process ends; each test copies it into its own directory, which the
// harness removes.
var built struct {
	once sync.Once
	f    *os.File
	size int64
	err  error
}

// installMeshlaunch copies the meshlaunch binary into dir, executable by
// every user, and returns its path.
func installMeshlaunch(t *testing.T, dir string) string {
	t.Helper()
	built.once.Do(func() { built.f, built.size, built.err = buildMeshlaunch() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	path := filepath.Join(dir, "meshlaunch")
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(out, io.NewSectionReader(built.f, 0, built.size))
	if err = errors.Join(err, out.Close()); err != nil {
		t.Fatalf("install meshlaunch: %v", err)
	}
	return path
}

// buildMeshlaunch builds a static binary and returns it open and unlinked.
func buildMeshlaunch() (*os.File, int64, error) {
	dir, err := os.MkdirTemp("", "nssidecar-build-")
	if err != nil {
		return nil, 0, fmt.Errorf("build meshlaunch: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "meshlaunch")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/meshlaunch/meshlaunch/cmd/meshlaunch")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, 0, fmt.Errorf("go build meshlaunch: %w\n%s", err, out)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("build meshlaunch: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("build meshlaunch: %w", err)
	}
	return f, st.Size(), nil
}

// sharedDir is a directory every user can read and traverse, removed at
// t's cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nssidecar-")
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
