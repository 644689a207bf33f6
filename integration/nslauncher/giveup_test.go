package nslauncher

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// TestGiveUpAfterSidecarChangesSecret: the sidecar comes back with another
// secret while the job runs. The launcher cannot reconnect (401); with
// --give-up-after it stops the job and exits non-zero saying why. The
// positive control is the same restart with the same secret, where the
// job keeps running.
func TestGiveUpAfterSidecarChangesSecret(t *testing.T) {
	c := newCluster(t)
	flags := []string{"--give-up-after", "3s", "--kill-grace", "2s"}
	p := c.start(t, launch{flags: flags, timeout: 90 * time.Second}, "sleep", "1000")
	waitStderr(t, p, "joined")

	restart := func(extra ...string) {
		t.Helper()
		if err := c.Sidecar.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := c.Sidecar.Wait(30 * time.Second); err != nil || code != 0 {
			t.Fatalf("sidecar exit %d, %v", code, err)
		}
		c.Sidecar = c.Topo.Start(t, c.Topo.Pod, nstest.ProcOpts{User: nobody}, c.SidecarArgv(extra...)...)
		c.WaitReady(t, c.Sidecar, 15*time.Second)
	}

	restart() // same secret: the launcher reconnects and the job lives on
	time.Sleep(5 * time.Second)
	select {
	case <-p.Done():
		t.Fatalf("the job ended after a restart with the same secret:\n%s", p.Stderr())
	default:
	}

	restart("--token-file", c.NewToken(t, "other-secret"))
	start := time.Now()
	code, err := p.Wait(30 * time.Second)
	if err != nil {
		t.Fatalf("launcher did not give up: %v\nstderr:\n%s", err, p.Stderr())
	}
	if code == 0 || time.Since(start) > 20*time.Second {
		t.Fatalf("launcher exit %d after %s; want non-zero within --give-up-after + --kill-grace", code, time.Since(start))
	}
	for _, want := range []string{"give-up-after", "401"} {
		if !strings.Contains(p.Stderr(), want) {
			t.Fatalf("stderr does not say %q:\n%s", want, p.Stderr())
		}
	}
}

// waitStderr waits until p's stderr holds want.
func waitStderr(t *testing.T, p *nstest.Proc, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.Stderr(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on stderr:\n%s", want, p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
