package wsproxy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.zx2c4.com/wireguard/conn"
)

// router plays the device for tests with several peers: it runs the
// server's receive function and counts and keeps each peer's datagrams.
// Server.Close stops it; cleanup waits for it.
type router struct {
	mu    sync.Mutex
	got   map[string][][]byte
	eps   map[string]conn.Endpoint
	count map[string]*atomic.Int64
	wg    sync.WaitGroup
}

func newRouter(t *testing.T, srv *Server) *router {
	t.Helper()
	recv := opened(t, srv)
	r := &router{got: map[string][][]byte{}, eps: map[string]conn.Endpoint{}, count: map[string]*atomic.Int64{}}
	r.wg.Go(func() { r.run(recv) })
	t.Cleanup(func() { srv.Close(); r.wg.Wait() })
	return r
}

func (r *router) run(recv conn.ReceiveFunc) {
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, maxDatagram)
	}
	sizes := make([]int, batchSize)
	eps := make([]conn.Endpoint, batchSize)
	for {
		n, err := recv(bufs, sizes, eps)
		if err != nil {
			return
		}
		for i := range n {
			r.add(eps[i], bufs[i][:sizes[i]])
		}
	}
}

// add keeps the last 64 datagrams of a peer and counts all of them.
func (r *router) add(ep conn.Endpoint, b []byte) {
	se, ok := ep.(*sessionEndpoint)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got := append(r.got[se.peer], append([]byte(nil), b...))
	if len(got) > 64 {
		got = got[1:]
	}
	r.got[se.peer] = got
	r.eps[se.peer] = ep
	r.counter(se.peer).Add(1)
}

func (r *router) counter(peer string) *atomic.Int64 {
	c := r.count[peer]
	if c == nil {
		c = new(atomic.Int64)
		r.count[peer] = c
	}
	return c
}

// n is how many datagrams peer sent so far.
func (r *router) n(peer string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counter(peer).Load()
}

// has reports whether peer's recent datagrams include want.
func (r *router) has(peer, want string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.got[peer] {
		if string(b) == want {
			return true
		}
	}
	return false
}

// endpoint is peer's latest session endpoint, or nil.
func (r *router) endpoint(peer string) conn.Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eps[peer]
}

// dialPeer opens a websocket session with cred; it is closed in cleanup.
func dialPeer(t *testing.T, url, cred string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader:   map[string][]string{"Authorization": {"Bearer " + cred}},
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// witness is a second peer that keeps sending numbered datagrams until
// stopped, and reads (answering pings) what the server sends it.
type witness struct {
	ws     *websocket.Conn
	sent   atomic.Int64
	recvd  chan []byte
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startWitness starts the sender and the reader on ws; stop ends both.
func startWitness(t *testing.T, ws *websocket.Conn) *witness {
	ctx, cancel := context.WithCancel(context.Background())
	w := &witness{ws: ws, recvd: make(chan []byte, 1024), cancel: cancel}
	w.wg.Go(func() { w.send(ctx) })
	w.wg.Go(func() { w.read(ctx) })
	t.Cleanup(w.stop)
	return w
}

func (w *witness) send(ctx context.Context) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.ws.Write(ctx, websocket.MessageBinary, fmt.Appendf(nil, "witness-%d", i)); err != nil {
			return // the test sees the datagrams stop
		}
		w.sent.Add(1)
	}
}

func (w *witness) read(ctx context.Context) {
	for {
		_, b, err := w.ws.Read(ctx)
		if err != nil {
			return
		}
		select {
		case w.recvd <- b:
		default: // the test reads only what it waits for
		}
	}
}

// stop ends the witness's goroutines.
func (w *witness) stop() {
	w.cancel()
	w.ws.CloseNow()
	w.wg.Wait()
}

// expect waits for the server's datagram want at the witness.
func (w *witness) expect(t *testing.T, want string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case b := <-w.recvd:
			if string(b) == want {
				return
			}
		case <-deadline:
			t.Fatalf("witness did not receive %q within %s", want, d)
		}
	}
}

// progresses fails unless the router sees more datagrams from peer within d.
func (r *router) progresses(t *testing.T, peer string, d time.Duration) {
	t.Helper()
	start := r.n(peer)
	eventually(t, d, peer+"'s datagrams to keep arriving", func() bool { return r.n(peer) > start+5 })
}
