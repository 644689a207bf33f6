package slurm

import (
	"crypto/rand"
	"encoding/hex"
	"os"
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
)

// cluster is an nstest.MeshCluster whose Ingress proxies to sidecarAddr
// and a SLURM in its node namespace. Each subtest starts its own sidecar.
// The cluster's directory (0755) holds meshlaunch, the sidecars' secrets
// and SLURM's files.
type cluster struct {
	*nstest.MeshCluster
	slurm *slurmCluster
	uid   int // nobody's
	gid   int
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	nstest.Require(t)
	u, err := user.Lookup(nobody)
	if err != nil {
		t.Skipf("no user %s: %v", nobody, err)
	}
	c := &cluster{MeshCluster: nstest.NewMeshCluster(t, nstest.MeshOpts{
		Meshlaunch:  meshlaunchBin,
		SidecarAddr: sidecarAddr,
		NoSidecar:   true,
	})}
	c.uid, _ = strconv.Atoi(u.Uid)
	c.gid, _ = strconv.Atoi(u.Gid)
	slurmDir := filepath.Join(c.Dir, "slurm")
	if err := os.Mkdir(slurmDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.slurm = startSlurm(t, c.Topo, slurmDir)
	return c
}

// startSidecar writes secret where only nobody reads it (as a Secret
// volume would) and runs "meshlaunch sidecar" as nobody in the pod
// namespace with args after the listen address and the secret, plus env;
// it is stopped at t's cleanup. It returns once the sidecar is ready
// through the Ingress.
func (c *cluster) startSidecar(t *testing.T, secret string, env []string, args ...string) *nstest.Proc {
	t.Helper()
	dir := c.privateDir(t, filepath.Join(c.Dir, "sidecar-"+sanitize(t.Name())))
	token := c.writeSecret(t, dir, secret)
	argv := append([]string{c.Bin, "sidecar", "--listen", sidecarAddr, "--token-file", token,
		"--shutdown-grace", "1s"}, args...)
	p := c.Topo.Start(t, c.Topo.Pod, nstest.ProcOpts{User: nobody, Env: env}, argv...)
	c.WaitReady(t, p, 15*time.Second)
	return p
}

// jobDir makes a directory for one job, nobody's with mode 0700, inside
// the cluster's directory.
func (c *cluster) jobDir(t *testing.T, name string) string {
	t.Helper()
	return c.privateDir(t, filepath.Join(c.Dir, "job-"+name))
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
