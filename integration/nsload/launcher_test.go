package nsload

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// startLauncher runs "meshlaunch run" with job in the node namespace, as
// nobody with no capabilities and a private /dev/net/tun at 0666, in the
// background (cleanup stops it), and waits until it has joined.
func (c *cluster) startLauncher(t *testing.T, stdin *os.File, job ...string) *nstest.Proc {
	t.Helper()
	argv := append(nstest.AsUserWithTUN(t, nobody, 0o666), c.Bin, "run", "--server", c.Ingress.URL, "--ca-file", c.Ingress.CAFile,
		"--token-file", c.Token, "--wait", "30s", "--")
	p := c.Topo.Start(t, c.Topo.Node, launcherOpts(stdin), append(argv, job...)...)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.Stderr(), "joined") {
		select {
		case <-p.Done():
			t.Fatalf("launcher exited before joining:\n%s", p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("launcher did not join within 30 s:\n%s", p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// roleJob is a job that runs this package's role from the cluster's copy
// of the test binary.
func (c *cluster) roleJob(role string, args ...string) []string {
	return append(append([]string{"env"}, roleEnvironment(role)...), append([]string{c.Roles}, args...)...)
}

// launcherOpts is the launcher's environment: no proxy (the test host's
// must not leak in), a HOME nobody can use, and stdin.
func launcherOpts(stdin *os.File) nstest.ProcOpts {
	opts := nstest.ProcOpts{Env: nstest.ClientEnv()}
	if stdin != nil {
		opts.Stdin = stdin
	}
	return opts
}
