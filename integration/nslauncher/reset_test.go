package nslauncher

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// TestDownloadSurvivesIngressRestart restarts nginx, the Ingress, in the
// middle of a download the job makes from a cluster Service: every
// websocket through it is cut. The launcher reconnects by itself and the
// job's TCP connection, riding the tunnel, completes byte-exact.
func TestDownloadSurvivesIngressRestart(t *testing.T) {
	c := newCluster(t)
	const size = 24 << 20 // at 4 MB/s: 6 s, so the restart lands mid-transfer
	sum := sha256.Sum256(nstest.Pattern(size))
	want := hex.EncodeToString(sum[:])
	job := fmt.Sprintf("curl -sS --limit-rate 4M --max-time 60 http://%s/bytes?n=%d | sha256sum", nstest.ServiceIP, size)
	p := c.start(t, launch{timeout: 90 * time.Second}, "sh", "-c", job)

	time.Sleep(2 * time.Second) // the download is under way
	if err := c.Ingress.Proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ingress.Proc.Wait(10 * time.Second); err != nil {
		t.Fatalf("nginx did not stop: %v", err)
	}
	select {
	case <-p.Done():
		t.Fatalf("the launcher ended with the Ingress:\nstdout:\n%s\nstderr:\n%s", p.Stdout(), p.Stderr())
	default:
	}
	c.Ingress = c.Topo.StartIngress(t, nstest.IngressOpts{Upstream: nstest.SidecarAddr, Certs: c.Ingress.Certs})

	code, err := p.Wait(60 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("launcher: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, p.Stdout(), p.Stderr())
	}
	if got := strings.Fields(p.Stdout()); len(got) == 0 || !strings.Contains(p.Stdout(), want) {
		t.Fatalf("download digest %q, want %s (the transfer broke or was corrupted)\nstderr:\n%s", p.Stdout(), want, p.Stderr())
	}
	if !strings.Contains(p.Stderr(), "reconnect") {
		t.Fatalf("no reconnect logged: the Ingress restart did not cut the websocket\nstderr:\n%s", p.Stderr())
	}
}
