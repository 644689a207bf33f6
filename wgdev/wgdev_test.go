package wgdev

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
)

func TestUAPIConfig(t *testing.T) {
	k, _ := identity.NewPrivateKey()
	p, _ := identity.NewPrivateKey()
	got, err := uapiConfig(Config{PrivateKey: k, Peers: []Peer{{
		PublicKey: p.Public(), Endpoint: "wss://h/mesh", PersistentKeepalive: 25 * time.Second,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/8")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "private_key=" + k.Hex() + "\npublic_key=" + p.Public().Hex() +
		"\nendpoint=wss://h/mesh\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\nallowed_ip=10.0.0.0/8\n"
	if got != want {
		t.Fatalf("uapi:\n%s\nwant:\n%s", got, want)
	}
	if _, err := uapiConfig(Config{PrivateKey: k, Peers: []Peer{{Endpoint: "a\nprivate_key=x"}}}); err == nil {
		t.Fatal("an endpoint with a newline was accepted into the UAPI text")
	}
}

func TestParsePeers(t *testing.T) {
	k, _ := identity.NewPrivateKey()
	uapi := strings.Join([]string{
		"private_key=00", "listen_port=0",
		"public_key=" + k.Public().Hex(), "endpoint=ws-session-3(job)",
		"last_handshake_time_sec=1700000000", "last_handshake_time_nsec=5",
		"rx_bytes=10", "tx_bytes=20",
		"public_key=" + strings.Repeat("11", 32),
		"last_handshake_time_sec=0", "last_handshake_time_nsec=0",
	}, "\n")
	peers, err := parsePeers(uapi)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 2 {
		t.Fatalf("%d peers, want 2", len(peers))
	}
	p := peers[0]
	if p.PublicKey != k.Public().String() || p.Endpoint != "ws-session-3(job)" || p.RxBytes != 10 || p.TxBytes != 20 ||
		!p.LastHandshake.Equal(time.Unix(1700000000, 5)) {
		t.Fatalf("peer 0 = %+v", p)
	}
	if !peers[1].LastHandshake.IsZero() {
		t.Fatalf("peer without handshake has %v", peers[1].LastHandshake)
	}
}

func TestLimiter(t *testing.T) {
	var l limiter
	now := time.Unix(0, 0).Add(time.Hour)
	passed := 0
	for range 100 {
		if ok, _ := l.allow(now); ok {
			passed++
		}
	}
	if passed != errorBurst {
		t.Fatalf("%d passed in one window, want %d", passed, errorBurst)
	}
	ok, dropped := l.allow(now.Add(errorWindow))
	if !ok || dropped != 100-errorBurst {
		t.Fatalf("next window: ok=%v dropped=%d, want true %d", ok, dropped, 100-errorBurst)
	}
}
