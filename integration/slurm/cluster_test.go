package slurm

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const (
	nobody = "nobody"
	// sidecarAddr is where the sidecar listens and nginx proxies to (the
	// port of deploy/interlink/shadow-pod.yaml).
	sidecarAddr = nstest.PodIP + ":28080"
	// webName resolves to ServiceIP in the cluster's DNS; jobs ask for
	// "web" and the pod's search path completes it.
	webName = "web.default.svc.cluster.local"
)

// cluster is one nstest topology (httpecho on the Service, dnsmasq naming
// it webName, nginx as the Ingress to sidecarAddr) and a SLURM in its node
// namespace. Each subtest starts its own sidecar.
type cluster struct {
	topo    *nstest.Topology
	ingress *nstest.Ingress
	slurm   *slurmCluster
	dir     string // 0755: meshlaunch, the sidecars' secrets, SLURM's files
	bin     string // meshlaunch, executable by every user
	uid     int    // nobody's
	gid     int
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	topo := nstest.NewTopology(t, nstest.Options{}) // skips unless root
	u, err := user.Lookup(nobody)
	if err != nil {
		t.Skipf("no user %s: %v", nobody, err)
	}
	c := &cluster{topo: topo, dir: sharedDir(t)}
	c.uid, _ = strconv.Atoi(u.Uid)
	c.gid, _ = strconv.Atoi(u.Gid)
	c.bin = install(t, c.dir, "meshlaunch", meshlaunchBin)
	topo.StartRole(t, topo.Svc, "", "httpecho", nstest.ServiceIP+":80")
	topo.StartDNS(t, map[string]netip.Addr{webName: netip.MustParseAddr(nstest.ServiceIP)})
	c.ingress = topo.StartIngress(t, nstest.IngressOpts{Upstream: sidecarAddr})
	topo.WaitTCP(t, topo.Svc, nstest.ServiceIP+":80", 10*time.Second)
	slurmDir := filepath.Join(c.dir, "slurm")
	if err := os.Mkdir(slurmDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.slurm = startSlurm(t, topo, slurmDir)
	return c
}

// startSidecar writes secret where only nobody reads it (as a Secret
// volume would) and runs "meshlaunch sidecar" as nobody in the pod
// namespace with args after the listen address and the secret, plus env;
// it is stopped at t's cleanup. It returns once the sidecar is ready
// through the Ingress.
func (c *cluster) startSidecar(t *testing.T, secret string, env []string, args ...string) *nstest.Proc {
	t.Helper()
	dir := c.privateDir(t, filepath.Join(c.dir, "sidecar-"+sanitize(t.Name())))
	token := c.writeSecret(t, dir, secret)
	argv := append([]string{c.bin, "sidecar", "--listen", sidecarAddr, "--token-file", token,
		"--shutdown-grace", "1s"}, args...)
	p := c.topo.Start(t, c.topo.Pod, nstest.ProcOpts{User: nobody, Env: env}, argv...)
	c.waitReady(t, p, 15*time.Second)
	return p
}

// waitReady polls the sidecar's /readyz from the node through the
// Ingress, the launcher's own path, until it answers 200.
func (c *cluster) waitReady(t *testing.T, sidecar *nstest.Proc, timeout time.Duration) {
	t.Helper()
	tr := &http.Transport{
		DialContext:       nstest.DialerIn(t, c.topo.Node),
		TLSClientConfig:   &tls.Config{RootCAs: c.ingress.Certs.CAPool()},
		DisableKeepAlives: true,
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
		case <-sidecar.Done():
			t.Fatalf("sidecar exited before it was ready:\n%s", sidecar.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar not ready at %s within %v (last error: %v)", url, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jobDir makes a directory for one job, nobody's with mode 0700, inside
// the cluster's directory.
func (c *cluster) jobDir(t *testing.T, name string) string {
	t.Helper()
	return c.privateDir(t, filepath.Join(c.dir, "job-"+name))
}

// privateDir makes path, nobody's with mode 0700.
func (c *cluster) privateDir(t *testing.T, path string) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, c.uid, c.gid); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeSecret writes secret into dir/token, nobody's with mode 0600: the
// way a user keeps the shadow pod's secret on the node.
func (c *cluster) writeSecret(t *testing.T, dir, secret string) string {
	t.Helper()
	return c.writeFile(t, filepath.Join(dir, "token"), secret+"\n", 0o600)
}

// writeFile writes text into path, nobody's with mode.
func (c *cluster) writeFile(t *testing.T, path, text string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, c.uid, c.gid); err != nil {
		t.Fatal(err)
	}
	return path
}

// newToken returns a fresh secret from "meshlaunch token".
func (c *cluster) newToken(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(c.bin, "token").Output()
	if err != nil {
		t.Fatalf("meshlaunch token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// randomPassword returns a secret shaped like interLink's RandomPassword:
// 16 random bytes in hex.
func randomPassword(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// sharedDir is a directory every user can read and traverse, removed at
// t's cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "meshlaunch-slurm-")
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

// sanitize turns a test name into a file name.
func sanitize(name string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(name)
}

// readFile returns path's contents, or a note saying why there are none.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}
