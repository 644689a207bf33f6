package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"golang.zx2c4.com/wireguard/device"
)

// attacker is a session that holds the credential and claims an explicit
// peer's key but speaks WireGuard only as far as the test makes it: it
// sends raw datagrams and counts what the sidecar answers.
type attacker struct {
	ws *websocket.Conn
	cg device.CookieGenerator // MACs for the sidecar's key

	answers   atomic.Int64 // every datagram received
	responses atomic.Int64 // handshake responses
	cookies   atomic.Int64 // cookie replies
	mac2      atomic.Bool  // a cookie was consumed: MAC2s are valid now
	wg        sync.WaitGroup
}

// dialAttacker opens the attacker's session as peer pub and starts its
// reader; cleanup closes the session and waits for the reader.
func dialAttacker(t *testing.T, r *running, pub identity.PublicKey) *attacker {
	t.Helper()
	id, _ := identity.Derive(meshtest.Secret)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, r.meshURL(t).URL.String(), &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + id.Credential}, PeerHeader: {pub.String()}},
		Subprotocols: []string{"meshlaunch.wg.v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &attacker{ws: ws}
	a.cg.Init(device.NoisePublicKey(r.sc.privateKey().Public()))
	a.wg.Go(a.read)
	t.Cleanup(func() { ws.CloseNow(); a.wg.Wait() })
	return a
}

// read counts the sidecar's answers and consumes cookie replies.
func (a *attacker) read() {
	for {
		_, b, err := a.ws.Read(context.Background())
		if err != nil {
			return
		}
		a.answers.Add(1)
		switch {
		case len(b) >= 4 && b[0] == wgResponse:
			a.responses.Add(1)
		case len(b) == device.MessageCookieReplySize && b[0] == wgCookie:
			a.cookies.Add(1)
			var reply device.MessageCookieReply
			reply.Type = wgCookie
			reply.Receiver = binary.LittleEndian.Uint32(b[4:8])
			copy(reply.Nonce[:], b[8:32])
			copy(reply.Cookie[:], b[32:])
			if a.cg.ConsumeReply(&reply) {
				a.mac2.Store(true)
			}
		}
	}
}

func (a *attacker) send(t *testing.T, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.ws.Write(ctx, websocket.MessageBinary, b); err != nil {
		t.Fatalf("attacker write: %v", err)
	}
}

// expectSilence fails if the sidecar answers anything within d. (The
// handshake flood later shows that this session does get answers.)
func (a *attacker) expectSilence(t *testing.T, d time.Duration) {
	t.Helper()
	before := a.answers.Load()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := a.answers.Load(); n != before {
			t.Fatalf("the sidecar answered %d datagrams", n-before)
		}
	}
}

// flood sends handshake initiations with valid MACs and random content
// until ctx ends, as fast as it can. Once the device answers with cookies
// (it is under load), and until one was consumed, it pauses after each
// burst, so that the reply to its latest initiation can arrive and be
// consumed: then its MAC2s are valid and only the rate limiter stands in
// its way.
func (a *attacker) flood(ctx context.Context, sent *atomic.Int64) {
	msg := make([]byte, wgInitSize)
	for i := 0; ctx.Err() == nil; i++ {
		_, _ = rand.Read(msg)
		binary.LittleEndian.PutUint32(msg, wgInitiation)
		a.cg.AddMacs(msg)
		if err := a.ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
			return
		}
		sent.Add(1)
		if i%64 == 63 && a.cookies.Load() > 0 && !a.mac2.Load() {
			a.awaitCookie(ctx, 100*time.Millisecond)
		}
	}
}

// awaitCookie waits up to d (or ctx) for a consumed cookie.
func (a *attacker) awaitCookie(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for !a.mac2.Load() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}
