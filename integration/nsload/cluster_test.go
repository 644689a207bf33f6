package nsload

import (
	"net/http"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
)

const (
	nobody = "nobody"
	// sumAddr is where the Service's sumserver listens.
	sumAddr = nstest.ServiceIP + ":7000"
	// jobPort is the exposed port the job's sumserver listens on.
	jobPort = nstest.ExposedTCP
)

// cluster is an nstest.MeshCluster with a copy of the test binary
// (Roles, for this package's roles) and a sumserver on the Service.
type cluster struct {
	*nstest.MeshCluster
	pod *http.Client // requests from inside the pod namespace
}

// newCluster builds the cluster with a ready sidecar; sidecarFlags are
// added to its command line (nstest.SidecarArgv).
func newCluster(t *testing.T, sidecarFlags ...string) *cluster {
	t.Helper()
	c := buildCluster(t, nstest.MeshOpts{})
	c.startSidecar(t, sidecarFlags...)
	return c
}

// newPeersCluster builds the cluster without a sidecar (the test starts
// one with explicit peers) and with meshtest's secret, from which
// in-process job peers derive the websocket credential.
func newPeersCluster(t *testing.T) *cluster {
	t.Helper()
	return buildCluster(t, nstest.MeshOpts{Secret: meshtest.Secret})
}

func buildCluster(t *testing.T, opts nstest.MeshOpts) *cluster {
	t.Helper()
	opts.Meshlaunch, opts.Roles, opts.NoSidecar = meshlaunchBin, "nsload-roles", true
	c := &cluster{MeshCluster: nstest.NewMeshCluster(t, opts)} // skips unless root
	tr := &http.Transport{DialContext: nstest.DialerIn(t, c.Topo.Pod), DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	c.pod = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	c.startRole(t, c.Topo.Svc, "sumserver", sumAddr)
	return c
}

// startSidecar runs the sidecar with extra flags as nobody, with the
// GOMEMLIMIT of its deployment (deployedSidecar), and waits until it is
// ready.
func (c *cluster) startSidecar(t *testing.T, extra ...string) {
	t.Helper()
	env := []string{"GOMEMLIMIT=" + deployedSidecar(t).goMemLimit}
	c.Sidecar = c.Topo.Start(t, c.Topo.Pod, nstest.ProcOpts{User: nobody, Env: env}, c.SidecarArgv(extra...)...)
	c.WaitReady(t, c.Sidecar, 15*time.Second)
}

// startRole runs one of this package's long-lived roles in ns as nobody
// and waits until it says it listens.
func (c *cluster) startRole(t *testing.T, ns, role string, args ...string) *nstest.Proc {
	t.Helper()
	p := c.Topo.Start(t, ns, nstest.ProcOpts{User: nobody, Env: roleEnvironment(role)}, append([]string{c.Roles}, args...)...)
	waitStdout(t, p, "listening on", 15*time.Second)
	return p
}

// roleEnvironment runs role, without the race runtime's 1 s sleep at exit.
func roleEnvironment(role string) []string {
	return []string{roleEnv + "=" + role, "GORACE=atexit_sleep_ms=0"}
}

// waitStdout waits until p's stdout holds want (nstest.Proc.WaitStdout).
func waitStdout(t *testing.T, p *nstest.Proc, want string, timeout time.Duration) {
	t.Helper()
	p.WaitStdout(t, timeout, want)
}
