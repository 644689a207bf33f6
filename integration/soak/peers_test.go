package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// peerAddrs are the launchers' addresses in the mesh, one explicit peer
// of the sidecar each. The first is the pod IP: its job serves the
// exposed port and runs the full mix; the others run the lighter mix of
// an extra launcher (job_test.go).
var peerAddrs = []string{nstest.PodIP, "10.244.1.77", "10.244.1.78"}

// peer is one launcher's identity: its name in the report, its address in
// the mesh and its private key's file.
type peer struct {
	name, addr, keyFile string
	main                bool // holds the pod IP: serves the exposed port
}

// startSidecar writes a key for the sidecar and one per peer into the
// shared directory (readable by nobody) and starts the sidecar as nobody
// with every peer listed (--peer PUBKEY=ADDR), then waits until it is
// ready through the Ingress.
func (c *cluster) startSidecar(t *testing.T) {
	t.Helper()
	flags := []string{"--private-key-file", writeKey(t, c.Dir, "sidecar.key")}
	for i, addr := range peerAddrs {
		k, err := identity.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		p := peer{name: fmt.Sprintf("launcher %d", i+1), addr: addr, main: i == 0}
		p.keyFile = writeKeyFile(t, c.Dir, fmt.Sprintf("peer%d.key", i+1), k)
		c.peers = append(c.peers, p)
		flags = append(flags, "--peer", k.Public().String()+"="+addr)
	}
	c.Sidecar = c.Topo.Start(t, c.Topo.Pod, nstest.ProcOpts{User: nobody}, c.SidecarArgv(flags...)...)
	c.WaitReady(t, c.Sidecar, 15*time.Second)
}

// writeKey writes a new private key into dir/name and returns the path.
func writeKey(t *testing.T, dir, name string) string {
	t.Helper()
	k, err := identity.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return writeKeyFile(t, dir, name, k)
}

// writeKeyFile writes k into dir/name, readable by the sidecar and the
// launchers (nobody), and returns the path.
func writeKeyFile(t *testing.T, dir, name string, k identity.PrivateKey) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(k.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
