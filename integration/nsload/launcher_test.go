package nsload

import (
	"os"
	"os/exec"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/tundev"
)

// startLauncher runs "meshlaunch run" with job in the node namespace, as
// nobody with no capabilities and a private /dev/net/tun at 0666, in the
// background (cleanup stops it), and waits until it has joined.
func (c *cluster) startLauncher(t *testing.T, stdin *os.File, job ...string) *nstest.Proc {
	t.Helper()
	argv := append(asNobody(t), c.Bin, "run", "--server", c.Ingress.URL, "--ca-file", c.Ingress.CAFile,
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
	env := []string{"HOME=/tmp"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	opts := nstest.ProcOpts{Env: env}
	if stdin != nil {
		opts.Stdin = stdin
	}
	return opts
}

// asNobody is the prefix of the launcher's command line: /dev/net/tun at
// 0666 in a private mount namespace (the host's node is never changed),
// then down to nobody with no capabilities, as nstest.ProcOpts.User does.
func asNobody(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(tundev.Path); err != nil {
		t.Skipf("no %s: %v", tundev.Path, err)
	}
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux): %v", tool, err)
		}
	}
	u, err := user.Lookup(nobody)
	if err != nil {
		t.Skipf("no user %s: %v", nobody, err)
	}
	setpriv := []string{"setpriv", "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--pdeathsig=KILL", "--"}
	return tundev.Wrap(t.TempDir(), 0o666, setpriv...)
}
