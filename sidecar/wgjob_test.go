package sidecar

import (
	"bytes"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/wgdev"
	"github.com/meshlaunch/meshlaunch/wsproxy"
	"golang.zx2c4.com/wireguard/conn"
)

// tapBind is a job's websocket Bind that keeps a copy of every datagram
// the job's WireGuard sends, for replaying them later.
type tapBind struct {
	*wsproxy.Client
	mu   sync.Mutex
	sent [][]byte
}

func (b *tapBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	b.mu.Lock()
	for _, p := range bufs {
		b.sent = append(b.sent, bytes.Clone(p))
	}
	b.mu.Unlock()
	return b.Client.Send(bufs, ep)
}

// sentOfType returns the datagrams sent so far whose WireGuard message
// type is typ.
func (b *tapBind) sentOfType(typ byte) [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out [][]byte
	for _, p := range b.sent {
		if len(p) >= 4 && p[0] == typ {
			out = append(out, p)
		}
	}
	return out
}

// startTappedJob is meshtest.StartJob for an explicit peer (key k,
// address addr) of a sidecar with key sk, with its sent datagrams tapped.
func startTappedJob(t *testing.T, r *running, sk, k identity.PrivateKey, addr netip.Addr) (*meshtest.Job, *tapBind) {
	t.Helper()
	id, _ := identity.Derive(meshtest.Secret)
	u := r.meshURL(t).URL
	trig := wgdev.NewTrigger(sk.Public())
	cli, err := wsproxy.NewClient(wsproxy.ClientConfig{
		URL: u, Credential: id.Credential, MTU: netstack.DefaultMTU,
		Header:    http.Header{PeerHeader: {k.Public().String()}},
		Proxy:     func(*url.URL) (*url.URL, error) { return nil, nil },
		Keepalive: wsproxy.Keepalive{Interval: 300 * time.Millisecond, Timeout: 700 * time.Millisecond},
		Backoff:   wsproxy.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		OnConnect: trig.Fire,
	})
	if err != nil {
		t.Fatal(err)
	}
	tap := &tapBind{Client: cli}
	st, err := netstack.New(netstack.Config{Addrs: []netip.Addr{addr}, MTU: netstack.DefaultMTU})
	if err != nil {
		t.Fatal(err)
	}
	d, err := wgdev.New(st, tap, wgdev.Config{
		PrivateKey: k,
		Peers: []wgdev.Peer{{
			PublicKey:  sk.Public(),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
			Endpoint:   cli.Endpoint(),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	trig.Attach(d)
	t.Cleanup(d.Close)
	j := &meshtest.Job{Stack: st, Client: cli, Device: d, Handshakes: trig}
	j.WaitReady(t, 10*time.Second)
	return j, tap
}

// joinPeer joins an explicit peer (key k, address addr) with meshtest's
// builder and waits up to d for its handshake.
func joinPeer(t *testing.T, r *running, sk, k identity.PrivateKey, addr netip.Addr, d time.Duration) *meshtest.Job {
	t.Helper()
	keys := identity.Identity{SidecarKey: sk, PeerKey: k}
	opt := *r.meshURL(t)
	opt.Keys, opt.Addr = &keys, addr
	opt.Client = func(c *wsproxy.ClientConfig) { c.Header = http.Header{PeerHeader: {k.Public().String()}} }
	j := meshtest.StartJob(t, opt)
	j.WaitReady(t, d)
	return j
}
