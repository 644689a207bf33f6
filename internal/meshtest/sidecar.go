package meshtest

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/wgdev"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// SidecarOptions configure StartSidecar; zero values take defaults.
type SidecarOptions struct {
	Secret  string                    // default Secret
	MTU     int                       // default netstack.DefaultMTU
	Forward *netstack.ForwarderConfig // default: LoopbackDialer, no policy
}

// Sidecar is the in-process sidecar-shaped peer.
type Sidecar struct {
	Stack  *netstack.Stack
	Server *wsproxy.Server
	Device *wgdev.Device
	HTTP   *httptest.Server
	// URL is the websocket URL of the mesh endpoint.
	URL *url.URL
}

// StartSidecar starts a sidecar-shaped peer on loopback.
func StartSidecar(tb testing.TB, opt SidecarOptions) *Sidecar {
	tb.Helper()
	if opt.Secret == "" {
		opt.Secret = Secret
	}
	if opt.MTU == 0 {
		opt.MTU = netstack.DefaultMTU
	}
	id, err := identity.Derive(opt.Secret)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := netstack.New(netstack.Config{Addrs: []netip.Addr{ServiceAddr}, MTU: opt.MTU})
	if err != nil {
		tb.Fatal(err)
	}
	fwd := netstack.ForwarderConfig{Dial: LoopbackDialer()}
	if opt.Forward != nil {
		fwd = *opt.Forward
	}
	if err := st.Forward(fwd); err != nil {
		st.Close()
		tb.Fatal(err)
	}
	srv, err := wsproxy.NewServer(wsproxy.ServerConfig{
		Auth:      wsproxy.NewBearerCredentials(map[string]string{id.Credential: "job"}),
		MTU:       opt.MTU,
		Keepalive: wsproxy.Keepalive{Interval: fastPing, Timeout: fastTimeout},
	})
	if err != nil {
		st.Close()
		tb.Fatal(err)
	}
	dev, err := wgdev.New(st, srv, wgdev.Config{
		PrivateKey: id.SidecarKey,
		Peers:      []wgdev.Peer{{PublicKey: id.PeerKey.Public(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(JobAddr, 32)}}},
	})
	if err != nil {
		tb.Fatal(err) // wgdev.New closed the stack
	}
	hs := httptest.NewServer(srv)
	u, err := wsproxy.ParseServerURL("ws://" + hs.Listener.Addr().String() + "/mesh")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Sidecar{Stack: st, Server: srv, Device: dev, HTTP: hs, URL: u}
	tb.Cleanup(s.close)
	return s
}

func (s *Sidecar) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Server.Shutdown(ctx)
	s.HTTP.Close()
	s.Device.Close()
}
