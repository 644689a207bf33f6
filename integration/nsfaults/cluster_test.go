package nsfaults

import (
	"net/netip"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
)

// echoAddr is nstest's tcpecho on the Service IP, started by newCluster.
const echoAddr = nstest.ServiceIP + ":7"

// cluster is an nstest.MeshCluster whose Ingress certificate also names
// 127.0.0.1 (where the relay listens in the node namespace), with
// tcpecho on echoAddr besides httpecho on the Service IP:80, and a copy
// of the test binary, Roles, for roles run as jobs.
type cluster struct {
	*nstest.MeshCluster
}

// clusterOpts changes the cluster; the zero value is the layout above.
type clusterOpts struct {
	idleTimeout time.Duration // nginx's proxy timeouts; 0 is its 60 s default
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	nstest.Require(t)
	certs, err := nstest.GenerateCerts(nstest.SharedDir(t, "nsfaults-certs-"), nstest.IngressServerName,
		netip.MustParseAddr(nstest.EdgeNodeIP), netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{nstest.NewMeshCluster(t, nstest.MeshOpts{
		Meshlaunch: meshlaunchBin,
		Roles:      "nsfaults-roles",
		Ingress:    nstest.IngressOpts{Certs: certs, IdleTimeout: o.idleTimeout},
	})}
	c.Topo.StartRole(t, c.Topo.Svc, "", "tcpecho", echoAddr)
	c.Topo.WaitTCP(t, c.Topo.Svc, echoAddr, 10*time.Second)
	return c
}

// startRelay runs a fault relay in the test process: it listens on the
// node namespace's loopback and dials the Ingress's TLS port from the node
// namespace. It returns the relay and the server URL that reaches the
// sidecar through it; cleanup closes it.
func (c *cluster) startRelay(t *testing.T) (*faultrelay.Relay, string) {
	t.Helper()
	r, err := faultrelay.Start(faultrelay.Config{
		Target:   nstest.EdgeNodeIP + ":443",
		Listener: listenIn(t, c.Topo.Node, "127.0.0.1:0"),
		Dial:     nstest.DialerIn(t, c.Topo.Node),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, "wss://" + r.Addr()
}
