package meshtest

import (
	"context"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/wgdev"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// JobOptions configure StartJob; zero values take defaults.
type JobOptions struct {
	URL    *url.URL // required: the sidecar's mesh endpoint
	Secret string   // default Secret
	// Keys, if set, override the keys derived from Secret (for tests
	// of wrong keys); the credential still derives from Secret.
	Keys *identity.Identity
	MTU  int        // default netstack.DefaultMTU
	Addr netip.Addr // default JobAddr
	// Addr6, if set, gives the job an IPv6 address too, so IPv6
	// destinations leave its stack.
	Addr6 netip.Addr
	// Client adjusts the websocket client (a proxy, a CA file, a dialer
	// into another network namespace).
	Client func(*wsproxy.ClientConfig)
}

// Job is the job-shaped peer: a netstack whose traffic goes through the
// mesh. Dial through Stack to reach what the sidecar forwards to.
type Job struct {
	Stack  *netstack.Stack
	Client *wsproxy.Client
	Device *wgdev.Device
	// Handshakes forces a handshake after every (re)connect; Fired
	// counts them.
	Handshakes *wgdev.Trigger
}

// StartJob joins a job-shaped peer to the sidecar at opt.URL. It does not
// wait for the websocket; see WaitReady.
func StartJob(tb testing.TB, opt JobOptions) *Job {
	tb.Helper()
	if opt.Secret == "" {
		opt.Secret = Secret
	}
	if opt.MTU == 0 {
		opt.MTU = netstack.DefaultMTU
	}
	if !opt.Addr.IsValid() {
		opt.Addr = JobAddr
	}
	id, err := identity.Derive(opt.Secret)
	if err != nil {
		tb.Fatal(err)
	}
	keys := id
	if opt.Keys != nil {
		keys = *opt.Keys
	}
	trig := wgdev.NewTrigger(keys.SidecarKey.Public())
	ccfg := wsproxy.ClientConfig{
		URL: opt.URL, Credential: id.Credential, MTU: opt.MTU,
		Proxy:     func(*url.URL) (*url.URL, error) { return nil, nil },
		Keepalive: wsproxy.Keepalive{Interval: fastPing, Timeout: fastTimeout},
		Backoff:   wsproxy.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		OnConnect: trig.Fire,
	}
	if opt.Client != nil {
		opt.Client(&ccfg)
	}
	cli, err := wsproxy.NewClient(ccfg)
	if err != nil {
		tb.Fatal(err)
	}
	addrs := []netip.Addr{opt.Addr}
	if opt.Addr6.IsValid() {
		addrs = append(addrs, opt.Addr6)
	}
	st, err := netstack.New(netstack.Config{Addrs: addrs, MTU: opt.MTU})
	if err != nil {
		tb.Fatal(err)
	}
	d, err := wgdev.New(st, cli, wgdev.Config{
		PrivateKey: keys.PeerKey,
		Peers: []wgdev.Peer{{
			PublicKey:  keys.SidecarKey.Public(),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")},
			Endpoint:   cli.Endpoint(),
		}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	trig.Attach(d)
	tb.Cleanup(d.Close)
	return &Job{Stack: st, Client: cli, Device: d, Handshakes: trig}
}

// WaitReady waits until the websocket is up and a WireGuard handshake has
// completed, or fails the test after d.
func (j *Job) WaitReady(tb testing.TB, d time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := j.Client.WaitConnected(ctx); err != nil {
		tb.Fatal(err)
	}
	for {
		if peers, err := j.Device.Peers(); err == nil && len(peers) == 1 && !peers[0].LastHandshake.IsZero() {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("no WireGuard handshake within %s", d)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
