package nsload

import (
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/sidecar"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// peer is one explicit peer of a sidecar: its key and in-tunnel address.
type peer struct {
	key  identity.PrivateKey
	addr netip.Addr
}

// explicitPeers writes a new sidecar key into the cluster's directory
// and returns the flags of a sidecar serving peers (--private-key-file,
// --peer PUBKEY=ADDR...) and that key.
func (c *cluster) explicitPeers(t *testing.T, peers ...peer) ([]string, identity.PrivateKey) {
	t.Helper()
	sk, err := identity.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.Dir, "sidecar.key")
	if err := os.WriteFile(path, []byte(sk.String()+"\n"), 0o644); err != nil { // read by nobody; a test key
		t.Fatal(err)
	}
	flags := []string{"--private-key-file", path}
	for _, p := range peers {
		flags = append(flags, "--peer", p.key.Public().String()+"="+p.addr.String())
	}
	return flags, sk
}

// joinPeer joins an in-process job peer (meshtest.Job) with p's key and
// address to the sidecar through the Ingress, from the node, naming its
// key in the peer header as explicit peers must; it waits for the
// WireGuard handshake.
//
// "meshlaunch run" cannot be an explicit peer: it derives its key from
// the secret and sends no peer header.
func (c *cluster) joinPeer(t *testing.T, p peer, sidecarKey identity.PrivateKey) *meshtest.Job {
	t.Helper()
	u, err := wsproxy.ParseServerURL(c.Ingress.URL + meshapi.MeshPath)
	if err != nil {
		t.Fatal(err)
	}
	dial := nstest.DialerIn(t, c.Topo.Node)
	job := meshtest.StartJob(t, meshtest.JobOptions{
		URL:  u,
		Keys: &identity.Identity{SidecarKey: sidecarKey, PeerKey: p.key},
		Addr: p.addr,
		Client: func(cc *wsproxy.ClientConfig) {
			cc.TLS.CAFile = c.Ingress.CAFile
			cc.DialContext = dial
			cc.Header = http.Header{sidecar.PeerHeader: {p.key.Public().String()}}
		},
	})
	job.WaitReady(t, 15*time.Second)
	return job
}

func newPeer(t *testing.T, addr string) peer {
	t.Helper()
	k, err := identity.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return peer{key: k, addr: netip.MustParseAddr(addr)}
}
