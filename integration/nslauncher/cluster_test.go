package nslauncher

import (
	"crypto/tls"
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
	nobody    = "nobody"
	nobodyUID = "65534"
	// sidecarAddr is where the sidecar listens and nginx proxies to.
	sidecarAddr = nstest.PodIP + ":8080"
	// webName resolves to ServiceIP in the cluster's DNS; the job asks
	// for "web" and the pod's search path completes it.
	webName = "web.default.svc.cluster.local"
	// Ports the sidecar exposes; the job listens on them.
	jobTCPPort = "9000"
	jobUDPPort = "9001"
)

// cluster is one topology with a ready sidecar: httpecho on the Service
// (ServiceIP:80, root in svc), dnsmasq naming it webName, nginx as the
// Ingress to sidecarAddr, "meshlaunch sidecar" as nobody in pod, and a
// directory every user can read with the binaries and the secret.
type cluster struct {
	topo    *nstest.Topology
	ingress *nstest.Ingress
	sidecar *nstest.Proc
	dir     string // 0755, removed at cleanup
	bin     string // meshlaunch
	roles   string // the test binary: $NSTEST_ROLE picks the role
	token   string // the shared secret's file
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	topo := nstest.NewTopology(t, nstest.Options{}) // skips unless root
	dir := sharedDir(t)
	c := &cluster{topo: topo, dir: dir}
	c.bin = install(t, dir, "meshlaunch", meshlaunchBin)
	c.roles = install(t, dir, "nstest-roles", testBin)
	c.token = c.newToken(t, "token")
	topo.StartRole(t, topo.Svc, "", "httpecho", nstest.ServiceIP+":80")
	topo.StartDNS(t, map[string]netip.Addr{webName: netip.MustParseAddr(nstest.ServiceIP)})
	c.ingress = topo.StartIngress(t, nstest.IngressOpts{Upstream: sidecarAddr})
	topo.WaitTCP(t, topo.Svc, nstest.ServiceIP+":80", 10*time.Second)
	c.sidecar = topo.Start(t, topo.Pod, nstest.ProcOpts{User: nobody}, c.bin, "sidecar",
		"--listen", sidecarAddr, "--token-file", c.token, "--pod-ip", nstest.PodIP,
		"--route", nstest.ServiceCIDR, "--route", nstest.ClusterCIDR,
		"--expose", jobTCPPort, "--expose", jobUDPPort+"/udp")
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
// Ingress, the launcher's own path, until it answers 200.
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
	dir, err := os.MkdirTemp("", "nslauncher-")
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
