package sidecar

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/conntest"
)

// startCountingSidecar is startSidecar on a listener that counts what the
// server read.
func startCountingSidecar(t *testing.T, mod func(*Config)) (*running, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var c conntest.Counts
	return startSidecarOn(t, conntest.Listener{Listener: ln, C: &c}, mod), &c.BytesRead
}

// rawConn dials the sidecar's listener; closed in cleanup.
func rawConn(t *testing.T, r *running) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readResponse reads one HTTP response and its body from c within d.
func readResponse(t *testing.T, c net.Conn, br *bufio.Reader, d time.Duration) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// waitClosed waits until the server closes c (EOF or reset), failing
// after d; it discards whatever else the server sends.
func waitClosed(t *testing.T, c net.Conn, br io.Reader, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", d)
	}
}

// upgradeRequest is a websocket upgrade to the mesh endpoint, with an
// Authorization header if auth is not empty.
func upgradeRequest(auth string) string {
	req := "GET /v1/mesh HTTP/1.1\r\nHost: sidecar\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
		"Sec-WebSocket-Protocol: meshlaunch.wg.v1\r\n"
	if auth != "" {
		req += "Authorization: " + auth + "\r\n"
	}
	return req + "\r\n"
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}
