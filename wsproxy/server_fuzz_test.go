package wsproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.zx2c4.com/wireguard/conn"
)

// The server fuzz target uses a small MTU so that oversized messages are
// within reach of short inputs.
const (
	fuzzMTU      = 100
	fuzzMaxInput = 2 << 10
	fuzzMaxMsgs  = 128
	witnessCred  = "witness-credential-0123456789"
)

// fuzzMsg is one websocket message a fuzz input decodes to.
type fuzzMsg struct {
	text bool
	b    []byte
}

// decodeFuzzMsgs splits data into messages: each is a two-byte header, then
// up to 1023 payload bytes (the length is the low 2 bits of the first byte
// and the second byte; a short tail is taken as it is). A first byte with
// both high bits set makes a text message.
func decodeFuzzMsgs(data []byte) []fuzzMsg {
	var msgs []fuzzMsg
	for len(data) >= 2 && len(msgs) < fuzzMaxMsgs {
		h, n := data[0], int(data[0]&3)<<8|int(data[1])
		data = data[2:]
		n = min(n, len(data))
		msgs = append(msgs, fuzzMsg{text: h&0xc0 == 0xc0, b: data[:n]})
		data = data[n:]
	}
	return msgs
}

// encodeFuzzMsgs is the inverse of decodeFuzzMsgs, for seeds.
func encodeFuzzMsgs(msgs ...fuzzMsg) []byte {
	var out []byte
	for _, m := range msgs {
		h := byte(len(m.b) >> 8 & 3)
		if m.text {
			h |= 0xc0
		}
		out = append(out, h, byte(len(m.b)))
		out = append(out, m.b...)
	}
	return out
}

func bin(b []byte) fuzzMsg { return fuzzMsg{b: b} }

// fuzzRx is one datagram the server's receive function yielded.
type fuzzRx struct {
	peer string
	b    []byte
}

// fuzzHarness is one server shared by every iteration, with a witness
// session of another peer that must be unaffected by what the fuzzed
// session sends.
type fuzzHarness struct {
	srv     *Server
	url     string
	limit   int
	witness *websocket.Conn
	rx      chan fuzzRx
	bad     chan string   // receive-side violations
	done    chan struct{} // closed in cleanup
	probe   int
	base    int // goroutines with only the witness connected
}

func newFuzzHarness(f *testing.F) *fuzzHarness {
	srv, hs := newTestServer(f, ServerConfig{
		MTU:  fuzzMTU,
		Auth: NewBearerCredentials(map[string]string{testCred: "peer-a", witnessCred: "witness"}),
	})
	h := &fuzzHarness{
		srv: srv, url: wsURL(f, hs).String(), limit: ReadLimit(fuzzMTU),
		rx: make(chan fuzzRx, 4*fuzzMaxMsgs), bad: make(chan string, 1), done: make(chan struct{}),
	}
	recv := opened(f, srv)
	var wg sync.WaitGroup
	wg.Go(func() { h.receive(recv) })
	ctx := context.Background()
	w, err := h.dial(ctx, witnessCred)
	if err != nil {
		f.Fatal(err)
	}
	h.witness = w
	w.CloseRead(ctx) // answers the server's pings
	f.Cleanup(func() {
		w.CloseNow()
		close(h.done)
		srv.Close()
		wg.Wait()
	})
	h.waitSessions(f, 1)
	h.base = netGoroutines()
	return h
}

// netGoroutines counts the goroutines of connections and sessions, leaving
// out the caller and the test framework's own (a fuzz worker has a few).
func netGoroutines() int { return len(netStackList()) }

// netStacks is the stacks netGoroutines counts, for a failure message.
func netStacks() string { return strings.Join(netStackList(), "\n\n") }

func netStackList() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\ngoroutine ") {
		if i > 0 && (strings.Contains(g, "github.com/coder/websocket") || strings.Contains(g, "net/http.(*") ||
			strings.Contains(g, "wsproxy.(*")) {
			out = append(out, "goroutine "+g)
		}
	}
	return out
}

// receive runs the device side: it takes datagrams with buffers far larger
// than the read limit, so an oversized delivery would show.
func (h *fuzzHarness) receive(recv conn.ReceiveFunc) {
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, maxDatagram)
	}
	sizes := make([]int, batchSize)
	eps := make([]conn.Endpoint, batchSize)
	for {
		n, err := recv(bufs, sizes, eps)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				h.report(fmt.Sprintf("receive: %v", err))
			}
			return
		}
		for i := range n {
			ep, ok := eps[i].(*sessionEndpoint)
			switch {
			case !ok:
				h.report(fmt.Sprintf("endpoint %T", eps[i]))
			case sizes[i] == 0 || sizes[i] > h.limit:
				h.report(fmt.Sprintf("datagram of %d bytes (read limit %d)", sizes[i], h.limit))
			default:
				select {
				case h.rx <- fuzzRx{ep.peer, bytes.Clone(bufs[i][:sizes[i]])}:
				case <-h.done:
					return
				}
			}
		}
	}
}

func (h *fuzzHarness) report(s string) {
	select {
	case h.bad <- s:
	default:
	}
}

func (h *fuzzHarness) dial(ctx context.Context, cred string) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, h.url, &websocket.DialOptions{
		HTTPHeader:   map[string][]string{"Authorization": {"Bearer " + cred}},
		Subprotocols: []string{Subprotocol},
	})
	return ws, err
}

// next returns the next datagram, or fails after a few seconds.
func (h *fuzzHarness) next(t *testing.T) fuzzRx {
	t.Helper()
	select {
	case r := <-h.rx:
		return r
	case s := <-h.bad:
		t.Fatal(s)
	case <-time.After(5 * time.Second):
		t.Fatal("no datagram within 5s")
	}
	return fuzzRx{}
}

func (h *fuzzHarness) waitSessions(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.srv.Stats().Sessions != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions, want %d", h.srv.Stats().Sessions, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// FuzzServerMessages sends fuzz input as websocket messages of one session.
// Every binary message of 1 to ReadLimit bytes reaches the receive function
// in order and nothing else does; the first text or oversized message
// closes the session with 1003 or 1009; a witness session of another peer
// keeps working; and the goroutines come back to where they were.
func FuzzServerMessages(f *testing.F) {
	limit := ReadLimit(fuzzMTU)
	wgInit := append([]byte{1, 0, 0, 0}, bytes.Repeat([]byte{0xa5}, 144)...) // handshake initiation size
	for _, msgs := range [][]fuzzMsg{
		{bin([]byte("hello")), bin([]byte("world"))},
		{bin(nil), bin(nil), bin(nil), bin([]byte("after empties"))},
		{bin(make([]byte, limit))},
		{bin([]byte("ok")), bin(make([]byte, limit+1)), bin([]byte("never"))},
		{bin([]byte("ok")), {text: true, b: []byte("text")}, bin([]byte("never"))},
		{{text: true}},
		{bin(wgInit), bin(wgInit[:32]), bin([]byte{4, 0, 0, 0})},
		{bin(make([]byte, 1023))},
	} {
		f.Add(encodeFuzzMsgs(msgs...))
	}
	f.Add([]byte{0x03})            // a lone header byte: no message
	f.Add([]byte{0x00, 0xff, 'x'}) // a short tail
	h := newFuzzHarness(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzMaxInput {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws, err := h.dial(ctx, testCred)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()

		var want [][]byte
		violation := websocket.StatusCode(-1)
		for _, m := range decodeFuzzMsgs(data) {
			typ := websocket.MessageBinary
			if m.text {
				typ = websocket.MessageText
			}
			err := ws.Write(ctx, typ, m.b)
			if m.text {
				violation = websocket.StatusUnsupportedData
			} else if len(m.b) > limit {
				violation = websocket.StatusMessageTooBig
			}
			if violation != -1 {
				break // the server may close before the write ends
			}
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			if len(m.b) > 0 {
				want = append(want, m.b)
			}
		}
		if violation != -1 {
			// The close comes after every earlier datagram was delivered.
			_, _, err := ws.Read(ctx)
			if got := websocket.CloseStatus(err); got != violation {
				t.Fatalf("close status %v (%v), want %v", got, err, violation)
			}
		} else {
			end := []byte(fmt.Sprintf("end-of-iteration-%d", h.probe))
			if err := ws.Write(ctx, websocket.MessageBinary, end); err != nil {
				t.Fatalf("write: %v", err)
			}
			want = append(want, end)
		}
		for i, w := range want {
			r := h.next(t)
			if r.peer != "peer-a" || !bytes.Equal(r.b, w) {
				t.Fatalf("datagram %d: got %d bytes from %s, want %d bytes from peer-a", i, len(r.b), r.peer, len(w))
			}
		}
		ws.CloseNow()

		// The witness still gets through, and nothing of peer-a follows.
		h.probe++
		probe := []byte(fmt.Sprintf("witness-%d", h.probe))
		if err := h.witness.Write(ctx, websocket.MessageBinary, probe); err != nil {
			t.Fatalf("witness write: %v", err)
		}
		if r := h.next(t); r.peer != "witness" || !bytes.Equal(r.b, probe) {
			t.Fatalf("got %q from %s, want the witness probe", r.b, r.peer)
		}
		h.waitSessions(t, 1)
		deadline := time.Now().Add(5 * time.Second)
		for netGoroutines() > h.base {
			if time.Now().After(deadline) {
				t.Fatalf("%d connection goroutines, %d before the session:\n%s", netGoroutines(), h.base, netStacks())
			}
			time.Sleep(time.Millisecond)
		}
	})
}
