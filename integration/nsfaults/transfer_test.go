package nsfaults

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
)

// downloadJob fetches size bytes of httpecho's pattern from the Service
// through the mesh, at most rate bytes per second (curl's --limit-rate,
// "" for no limit) and within maxTime, and prints their SHA-256 after
// "download".
func downloadJob(size int, rate string, maxTime time.Duration) string {
	limit := ""
	if rate != "" {
		limit = "--limit-rate " + rate + " "
	}
	return fmt.Sprintf("echo download $(curl -sS %s--max-time %d http://%s/bytes?n=%d | sha256sum)",
		limit, int(maxTime/time.Second), nstest.ServiceIP, size)
}

// wantDownload checks the digest downloadJob printed against the pattern.
func wantDownload(t *testing.T, stdout string, size int) {
	t.Helper()
	sum := sha256.Sum256(nstest.Pattern(size))
	want := hex.EncodeToString(sum[:])
	if got := strings.Fields(outputLine(t, stdout, "download")); len(got) == 0 || got[0] != want {
		t.Fatalf("download of %d bytes: digest %q, want %s (the transfer broke or was corrupted)", size, got, want)
	}
}

// waitDown waits until the relay has carried at least n bytes towards the
// node and returns when that happened; it fails t if p exits first or
// timeout passes. It also reports when the relay first accepted more than
// accepted connections (zero time if it did not).
func waitDown(t *testing.T, r *faultrelay.Relay, p *nstest.Proc, n int64, accepted int64, timeout time.Duration) (at, newConn time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		now := time.Now()
		if newConn.IsZero() && r.Accepted() > accepted {
			newConn = now
		}
		if r.Stats(faultrelay.Down).Bytes >= n {
			return now, newConn
		}
		select {
		case <-p.Done():
			t.Fatalf("%s exited before %d bytes crossed the relay (%d did)\nstdout:\n%s\nstderr:\n%s",
				p.Name(), n, r.Stats(faultrelay.Down).Bytes, p.Stdout(), p.Stderr())
		default:
		}
		if now.After(deadline) {
			t.Fatalf("only %d of %d bytes crossed the relay within %v\nlauncher stderr:\n%s",
				r.Stats(faultrelay.Down).Bytes, n, timeout, p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
