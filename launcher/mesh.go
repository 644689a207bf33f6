package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/wgdev"
	"github.com/meshlaunch/meshlaunch/wsproxy"
	"golang.zx2c4.com/wireguard/tun"
)

// mesh is the parent's end of the tunnel: wireguard-go on the job's TUN,
// carried by the websocket client.
type mesh struct {
	client *wsproxy.Client
	dev    *wgdev.Device
	peer   identity.PublicKey
}

// reconnectMax caps the launcher's reconnect backoff (wsproxy's default
// is 30 s). After a long carrier outage the delays have grown to the cap,
// and the cap is how long a carrier that came back may go unnoticed:
// measured by integration/nsfaults TestLongTransferSurvivesLongOutage, a
// 60 s outage left the launcher idle for 28 s after the carrier returned.
// One attempt every 2.5-5 s per launcher is no storm for a sidecar, which
// serves its own few peers.
const reconnectMax = 5 * time.Second

// startMesh brings the device up on t; the client starts connecting.
// The device owns t from here on.
func startMesh(rc RunConfig, id keys, t tun.Device, mtu int) (*mesh, error) {
	peer := id.sidecar
	trig := wgdev.NewTrigger(peer)
	cli, err := wsproxy.NewClient(wsproxy.ClientConfig{
		URL:         wsproxy.JoinPath(rc.Server, "/v1/mesh"),
		Credential:  id.credential,
		Header:      id.header(),
		MTU:         mtu,
		TLS:         rc.HTTP.TLS,
		Proxy:       rc.HTTP.Proxy,
		DialContext: rc.HTTP.DialContext,
		Backoff:     wsproxy.Backoff{Max: reconnectMax},
		OnConnect:   trig.Fire,
		Logger:      rc.Logger,
	})
	if err != nil {
		t.Close()
		return nil, err
	}
	dev, err := wgdev.New(t, cli, wgdev.Config{
		PrivateKey: id.private,
		Peers: []wgdev.Peer{{
			PublicKey: peer,
			// Anything may come from the sidecar (ingress keeps the
			// client's address); what goes in is decided by the routes.
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")},
			Endpoint:   cli.Endpoint(),
		}},
		Logger: rc.Logger,
	})
	if err != nil {
		return nil, err
	}
	trig.Attach(dev)
	return &mesh{client: cli, dev: dev, peer: peer}, nil
}

// waitReady waits for the websocket and a completed handshake. A refused
// credential fails at once; anything else is retried until ctx ends.
func (m *mesh) waitReady(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if errors.Is(m.client.LastError(), wsproxy.ErrUnauthorized) {
			return wsproxy.ErrUnauthorized
		}
		if peers, err := m.dev.Peers(); err == nil && len(peers) == 1 && !peers[0].LastHandshake.IsZero() {
			return nil
		}
		select {
		case <-ctx.Done():
			last := m.client.LastError()
			if m.client.Stats().Connected {
				last = errors.New("the websocket is up but no WireGuard handshake completed: the sidecar's keys do not match this secret")
			}
			return fmt.Errorf("launcher: tunnel not up: %w (last error: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

// close stops the device, which closes the TUN and the client.
func (m *mesh) close() { m.dev.Close() }
