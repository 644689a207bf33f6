package nssidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// meshlaunchBin is meshlaunch, built once by TestMain (nstest.BuildMeshlaunch)
// and installed by every test into its own cluster's directory.
var meshlaunchBin *os.File

func TestMain(m *testing.M) {
	if os.Getenv(nstest.RoleEnv) == "" && os.Geteuid() == 0 {
		var err error
		if meshlaunchBin, err = nstest.BuildMeshlaunch(); err != nil {
			fmt.Fprintf(os.Stderr, "nssidecar: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs a role and exits, or runs the tests and exits
}

const (
	nobody = "nobody"
	// grace is the sidecar's --shutdown-grace in every test.
	grace = 3 * time.Second
)

// serviceURL is httpecho on the Service, which answers the client address.
var serviceURL = "http://" + nstest.ServiceIP + "/"

// cluster is an nstest.MeshCluster without a sidecar, which each test
// starts itself (startSidecar); the token file holds meshtest.Secret, the
// in-process job's.
type cluster struct {
	*nstest.MeshCluster
	pod *http.Client // requests from inside the pod namespace
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{MeshCluster: nstest.NewMeshCluster(t, nstest.MeshOpts{
		Meshlaunch: meshlaunchBin,
		Secret:     meshtest.Secret,
		Sidecar: nstest.SidecarOpts{
			LogLevel: "debug",
			Flags:    []string{"--shutdown-grace", grace.String()},
		},
		NoSidecar: true,
	})}
	c.pod = httpClient(t, nstest.DialerIn(t, c.Topo.Pod))
	return c
}

// startSidecar runs the sidecar (nstest's SidecarArgv with extra flags
// appended) in pod as nobody with no capabilities and waits until it is
// ready.
func (c *cluster) startSidecar(t *testing.T, extra ...string) *nstest.Proc {
	t.Helper()
	p := c.Topo.Start(t, c.Topo.Pod, nstest.ProcOpts{User: nobody}, c.SidecarArgv(extra...)...)
	c.waitReadyz(t, p, http.StatusOK, 15*time.Second)
	return p
}

// waitReadyz polls /readyz until it answers want; it fails t if the
// sidecar exits first or timeout passes.
func (c *cluster) waitReadyz(t *testing.T, p *nstest.Proc, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := fetch(c.pod, "http://"+nstest.SidecarAddr+"/readyz")
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
	body := mustGet(t, c.pod, "http://"+nstest.SidecarAddr+"/metrics")
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
	u, err := wsproxy.ParseServerURL(c.Ingress.URL + meshapi.MeshPath)
	if err != nil {
		t.Fatal(err)
	}
	dial := nstest.DialerIn(t, c.Topo.Node)
	return meshtest.StartJob(t, meshtest.JobOptions{URL: u, Client: func(cc *wsproxy.ClientConfig) {
		cc.TLS.CAFile = c.Ingress.CAFile
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
