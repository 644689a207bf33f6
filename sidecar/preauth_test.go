package sidecar

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
)

// fiveMB is what the unauthenticated clients try to push.
const fiveMB = 5 << 20

// TestUnauthenticatedBulkIsNotRead: a client without a valid credential
// that pushes 5 MB (as a request body, or as a websocket frame right
// behind its refused upgrade) gets 401 and a closed connection; the
// server reads a bounded prefix of it and allocates no buffer for it. The
// same upgrade with the credential succeeds.
func TestUnauthenticatedBulkIsNotRead(t *testing.T) {
	r, read := startCountingSidecar(t, nil)
	id, _ := identity.Derive(meshtest.Secret)

	// Positive control: the upgrade with the credential is accepted.
	c := rawConn(t, r)
	br := bufio.NewReader(c)
	if _, err := c.Write([]byte(upgradeRequest("Bearer " + id.Credential))); err != nil {
		t.Fatal(err)
	}
	if resp, _ := readResponse(t, c, br, 10*time.Second); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade with the credential: %s", resp.Status)
	}
	c.Close()

	wsFrame := append([]byte{0x82, 0x80 | 127}, binary.BigEndian.AppendUint64(nil, fiveMB)...)
	wsFrame = append(wsFrame, 0, 0, 0, 0) // mask key
	cases := map[string]string{
		"request body": "POST /v1/mesh HTTP/1.1\r\nHost: sidecar\r\nAuthorization: Bearer wrong-credential\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", fiveMB),
		"websocket frame after a refused upgrade": upgradeRequest("Bearer wrong-credential") + string(wsFrame),
		"websocket frame without a credential":    upgradeRequest("") + string(wsFrame),
	}
	payload := make([]byte, fiveMB)
	for name, head := range cases {
		t.Run(name, func(t *testing.T) {
			c := rawConn(t, r)
			br := bufio.NewReader(c)
			msg := append([]byte(head), payload...)
			before, alloc := read.Load(), totalAlloc()
			writeDone := make(chan error, 1)
			go func() {
				_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
				_, err := c.Write(msg)
				writeDone <- err
			}()
			resp, body := readResponse(t, c, br, 10*time.Second)
			if resp.StatusCode != http.StatusUnauthorized || body != "unauthorized\n" {
				t.Fatalf("got %s %q, want 401 unauthorized", resp.Status, body)
			}
			waitClosed(t, c, br, 10*time.Second)
			<-writeDone // what the kernels buffered before the close, or an error
			n, grew := read.Load()-before, totalAlloc()-alloc
			t.Logf("server read %d KiB of %d KiB, allocated %d KiB", n>>10, (len(head)+fiveMB)>>10, grew>>10)
			if n > 1<<20 {
				t.Fatalf("the server read %d KiB from an unauthenticated client", n>>10)
			}
			if grew > 2<<20 {
				t.Fatalf("the server allocated %d KiB for an unauthenticated client", grew>>10)
			}
		})
	}
	m := get(t, r.base+"/metrics", "")
	if !strings.Contains(m, `meshlaunch_auth_failures_total{endpoint="mesh"} 3`) {
		t.Fatalf("refusals not counted:\n%s", grep(m, "auth_failures"))
	}
}
