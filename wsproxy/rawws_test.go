package wsproxy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/conntest"
)

// Websocket opcodes a raw client writes.
const (
	opContinuation = 0x0
	opBinary       = 0x2
)

// rawWS is a hand-written websocket client: it upgrades over a plain TCP
// connection and then writes frames exactly as the test builds them
// (fragments, empty frames), which a websocket library would not send.
type rawWS struct {
	c  net.Conn
	br *bufio.Reader
}

// dialRaw upgrades to the server hs with cred and the subprotocol.
func dialRaw(t *testing.T, hs *httptest.Server, cred string) *rawWS {
	t.Helper()
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /mesh HTTP/1.1\r\nHost: test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
		"Sec-WebSocket-Protocol: " + Subprotocol + "\r\nAuthorization: Bearer " + cred + "\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("raw upgrade: %s", resp.Status)
	}
	_ = c.SetDeadline(time.Time{})
	return &rawWS{c: c, br: br}
}

// frame encodes one masked client frame (mask key zero: the payload goes
// out as it is, which the protocol allows).
func frame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	out = append(out, 0, 0, 0, 0) // mask key
	return append(out, payload...)
}

// write sends raw bytes; the server may close while they are in flight.
func (r *rawWS) write(b []byte) error {
	_ = r.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := r.c.Write(b)
	return err
}

// closeCode reads frames until a close frame and returns its status code,
// or -1 if the connection ended without one.
func (r *rawWS) closeCode(d time.Duration) (int, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	for {
		var h [2]byte
		if _, err := readFull(r.br, h[:]); err != nil {
			return -1, err
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			var e [2]byte
			if _, err := readFull(r.br, e[:]); err != nil {
				return -1, err
			}
			n = int(binary.BigEndian.Uint16(e[:]))
		case 127:
			var e [8]byte
			if _, err := readFull(r.br, e[:]); err != nil {
				return -1, err
			}
			n = int(binary.BigEndian.Uint64(e[:]))
		}
		p := make([]byte, n)
		if _, err := readFull(r.br, p); err != nil {
			return -1, err
		}
		if h[0]&0x0f == 0x8 {
			if len(p) < 2 {
				return -1, fmt.Errorf("close frame of %d bytes", len(p))
			}
			return int(binary.BigEndian.Uint16(p)), nil
		}
	}
}

func readFull(br *bufio.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := br.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// newCountingServer is newTestServer whose listener counts what the
// server read.
func newCountingServer(t *testing.T, cfg ServerConfig) (*Server, *httptest.Server, *atomic.Int64) {
	t.Helper()
	s, err := NewServer(withTestDefaults(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var c conntest.Counts
	hs := httptest.NewUnstartedServer(s)
	hs.Listener = conntest.Listener{Listener: hs.Listener, C: &c}
	hs.Start()
	t.Cleanup(func() { stopTestServer(t, s, hs) })
	return s, hs, &c.BytesRead
}

// twoPeers authenticates testCred as peer-a and witnessCred as witness.
func twoPeers() Authenticator {
	return NewBearerCredentials(map[string]string{testCred: "peer-a", witnessCred: "witness"})
}
