package soak

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const nobody = "nobody"

// cluster is an nstest.MeshCluster (the sidecar as nobody with no
// capabilities, nginx as the Ingress, httpecho on the Service, dnsmasq)
// with tcpecho on the Service host for uploads and a fault relay on the
// node's loopback in front of the Ingress, through which every launcher
// connects. The Ingress certificate also names 127.0.0.1, so the
// launchers verify it through the relay. The sidecar has a key of its own
// and one explicit peer per launcher (peers), each with its own key: the
// first takes the pod IP, so the exposed port leads to its job.
type cluster struct {
	*nstest.MeshCluster
	relay  *nstest.Proc
	server string       // wss://127.0.0.1:PORT: the relay
	pod    *http.Client // from inside the pod namespace: /metrics
	svc    *http.Client // from the Service host: the job at the pod IP
	certs  *nstest.CertFiles
	peers  []peer
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	nstest.Require(t)
	certs, err := nstest.GenerateCerts(nstest.SharedDir(t, "soak-certs-"), nstest.IngressServerName,
		netip.MustParseAddr(nstest.EdgeNodeIP), netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{certs: certs, MeshCluster: nstest.NewMeshCluster(t, nstest.MeshOpts{
		Meshlaunch: meshlaunchBin,
		Roles:      "soak-roles",
		Ingress:    nstest.IngressOpts{Certs: certs},
		NoSidecar:  true,
	})}
	c.startSidecar(t)
	c.pod = newHTTPClient(nstest.DialerIn(t, c.Topo.Pod))
	c.svc = newHTTPClient(nstest.DialerIn(t, c.Topo.Svc))
	t.Cleanup(func() {
		c.pod.CloseIdleConnections()
		c.svc.CloseIdleConnections()
	})
	c.Topo.StartRole(t, c.Topo.Svc, nobody, "tcpecho", echoAddr)
	c.Topo.WaitTCP(t, c.Topo.Svc, echoAddr, 10*time.Second)
	c.relay = c.startRole(t, c.Topo.Node, "relay", nstest.EdgeNodeIP+":443")
	out := waitStdout(t, c.relay, 10*time.Second, "relay listening on ")
	_, addr, _ := strings.Cut(strings.TrimSpace(out), "relay listening on ")
	c.server = "wss://" + strings.Fields(addr)[0]
	return c
}

// startRole runs one of this package's roles in ns as nobody.
func (c *cluster) startRole(t *testing.T, ns, role string, args ...string) *nstest.Proc {
	t.Helper()
	opts := nstest.ProcOpts{User: nobody, Env: []string{roleEnv + "=" + role, "GORACE=atexit_sleep_ms=0"}}
	return c.Topo.Start(t, ns, opts, append([]string{c.Roles}, args...)...)
}

// waitStdout waits until p's stdout holds want (nstest.Proc.WaitStdout).
func waitStdout(t *testing.T, p *nstest.Proc, timeout time.Duration, want string) string {
	t.Helper()
	return p.WaitStdout(t, timeout, want)
}
