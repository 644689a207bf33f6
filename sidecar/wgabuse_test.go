package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/wgdev"
	"golang.zx2c4.com/wireguard/device"
)

// WireGuard message types and sizes.
const (
	wgInitiation = 1
	wgResponse   = 2
	wgCookie     = 3
	wgTransport  = 4
	wgInitSize   = 148
)

// TestWireGuardAbuseHitsOnlyThatSession: one session of a sidecar with
// three explicit peers sends malformed WireGuard messages, then replays
// another peer's captured handshake and data, then floods handshake
// initiations (with valid MACs, answering cookies as a real attacker
// would). Malformed and replayed messages get no answer and do not move
// the victim's endpoint or handshake; the flood is answered with cookies
// (the device is under load and rate-limits that session), while the
// victim keeps passing traffic and a third peer joins, handshakes and
// passes traffic during it.
func TestWireGuardAbuseHitsOnlyThatSession(t *testing.T) {
	sk, ka, kb, kc := newKey(t), newKey(t), newKey(t), newKey(t)
	addrA, addrB, addrC := netip.MustParseAddr("10.244.9.1"), netip.MustParseAddr("10.244.9.2"), netip.MustParseAddr("10.244.9.3")
	port := meshtest.EchoTCP(t)
	r := startSidecar(t, func(c *Config) {
		c.PrivateKey = sk
		c.Peers = []Peer{{PublicKey: ka.Public(), Addr: addrA}, {PublicKey: kb.Public(), Addr: addrB}, {PublicKey: kc.Public(), Addr: addrC}}
		c.dial = meshtest.LoopbackDialer()
	})
	a, tap := startTappedJob(t, r, sk, ka, addrA)
	mustEcho(t, a, addrA, port)
	victim := peerState(t, r, ka.Public())
	att := dialAttacker(t, r, kc.Public())

	t.Run("malformed", func(t *testing.T) {
		for _, m := range malformedMessages(sk.Public()) {
			att.send(t, m)
		}
		att.expectSilence(t, time.Second)
		mustEcho(t, a, addrA, port)
		if now := peerState(t, r, ka.Public()); now.Endpoint != victim.Endpoint {
			t.Fatalf("the victim's endpoint moved from %s to %s", victim.Endpoint, now.Endpoint)
		}
	})
	t.Run("replayed", func(t *testing.T) {
		inits, data := tap.sentOfType(wgInitiation), tap.sentOfType(wgTransport)
		if len(inits) == 0 || len(data) == 0 {
			t.Fatalf("captured %d initiations and %d data messages of the victim", len(inits), len(data))
		}
		for _, m := range append(inits, data...) {
			att.send(t, m)
		}
		att.expectSilence(t, time.Second)
		now := peerState(t, r, ka.Public())
		if now.Endpoint != victim.Endpoint || !now.LastHandshake.Equal(victim.LastHandshake) {
			t.Fatalf("replays changed the victim: endpoint %s → %s, handshake %v → %v",
				victim.Endpoint, now.Endpoint, victim.LastHandshake, now.LastHandshake)
		}
		mustEcho(t, a, addrA, port)
	})
	t.Run("handshake flood", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		var sent atomic.Int64
		wg.Go(func() { att.flood(ctx, &sent) })
		deadline := time.Now().Add(20 * time.Second)
		for att.cookies.Load() == 0 || !att.mac2.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("after %d initiations: %d cookie replies, cookie consumed %v; the device never came under load",
					sent.Load(), att.cookies.Load(), att.mac2.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
		start, before := time.Now(), sent.Load()
		mustEcho(t, a, addrA, port)
		b := joinPeer(t, r, sk, kb, addrB, 45*time.Second)
		mustEcho(t, b, addrB, port)
		t.Logf("during a flood of %d initiations (%d cookie replies), the victim echoed and a new peer joined in %s",
			sent.Load(), att.cookies.Load(), time.Since(start).Round(time.Millisecond))
		if sent.Load() < before+100 || ctx.Err() != nil {
			t.Fatalf("the flood stalled (%d → %d initiations): not a test of the rate limit", before, sent.Load())
		}
	})
	if att.responses.Load() != 0 {
		t.Fatalf("the attacker session got %d handshake responses", att.responses.Load())
	}
}

func newKey(t *testing.T) identity.PrivateKey {
	k, err := identity.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// mustEcho checks a TCP echo through the mesh from job (address src).
func mustEcho(t *testing.T, job *meshtest.Job, src netip.Addr, port uint16) {
	t.Helper()
	if err := echoTCPFrom(job, src, port, 20*time.Second); err != nil {
		t.Fatalf("echo from %v: %v", src, err)
	}
}

// peerState is the sidecar device's view of the peer with key pub.
func peerState(t *testing.T, r *running, pub identity.PublicKey) wgdev.PeerStats {
	t.Helper()
	peers, err := r.sc.dev.Peers()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if p.PublicKey == pub.String() {
			return p
		}
	}
	t.Fatalf("no peer %s on the sidecar", pub)
	return wgdev.PeerStats{}
}

// malformedMessages are datagrams WireGuard must drop without an answer:
// wrong sizes, unknown types, bad MACs, unknown receivers, and an
// initiation with a valid MAC1 whose content decrypts to nothing.
func malformedMessages(sidecar identity.PublicKey) [][]byte {
	random := func(n int) []byte { b := make([]byte, n); _, _ = rand.Read(b); return b }
	typed := func(typ uint32, n int) []byte {
		b := random(n)
		binary.LittleEndian.PutUint32(b, typ)
		return b
	}
	var cg device.CookieGenerator
	cg.Init(device.NoisePublicKey(sidecar))
	goodMAC1 := typed(wgInitiation, wgInitSize)
	cg.AddMacs(goodMAC1)
	return [][]byte{
		{0x01}, random(3), typed(wgInitiation, 4),
		typed(wgInitiation, wgInitSize), // bad MAC1
		goodMAC1[:wgInitSize-1],         // valid MACs, one byte short
		typed(wgResponse, 92),           // bad MAC1
		typed(wgCookie, 64),             // unknown receiver
		typed(wgTransport, 32),          // unknown receiver
		typed(wgTransport, 16),          // shorter than a transport header
		typed(5, 100), typed(0x01000000, wgInitSize), random(1447),
		goodMAC1, // passes MAC1; the static key does not decrypt
	}
}
