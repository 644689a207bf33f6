package wgdev

import (
	"sync"

	"github.com/meshlaunch/meshlaunch/identity"
)

// Trigger forces a handshake with one peer each time the carrier comes up.
//
// The carrier (a conn.Bind) must exist before the device, and it may
// connect before the device is attached: a Fire that comes too early is
// remembered and replayed by Attach. Safe for concurrent use.
type Trigger struct {
	peer identity.PublicKey

	mu      sync.Mutex
	dev     *Device
	pending bool
	fired   int
}

// NewTrigger returns a Trigger for handshakes with peer.
func NewTrigger(peer identity.PublicKey) *Trigger { return &Trigger{peer: peer} }

// Fire starts a handshake now, or at Attach if there is no device yet.
// It fits wsproxy.ClientConfig.OnConnect.
func (t *Trigger) Fire() {
	t.mu.Lock()
	d := t.dev
	if d == nil {
		t.pending = true
	}
	t.mu.Unlock()
	if d != nil {
		t.handshake(d)
	}
}

// Attach sets the device and replays a Fire that came before it.
func (t *Trigger) Attach(d *Device) {
	t.mu.Lock()
	t.dev = d
	replay := t.pending
	t.pending = false
	t.mu.Unlock()
	if replay {
		t.handshake(d)
	}
}

// Fired is how many handshakes the Trigger has started.
func (t *Trigger) Fired() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fired
}

func (t *Trigger) handshake(d *Device) {
	if d.Handshake(t.peer) == nil {
		t.mu.Lock()
		t.fired++
		t.mu.Unlock()
	}
}
