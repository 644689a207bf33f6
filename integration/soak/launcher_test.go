package soak

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

// startLauncher runs "meshlaunch run" in the node namespace as nobody
// with no capabilities, through the relay, with the job role for d; it
// returns once the job serves its exposed port. Cleanup stops it.
func (c *cluster) startLauncher(t *testing.T, d time.Duration) *nstest.Proc {
	t.Helper()
	argv := append(asNobody(t), c.Bin, "run", "--server", c.server, "--ca-file", c.Ingress.CAFile,
		"--token-file", c.Token, "--wait", "30s",
		"--", "env", roleEnv+"=job", c.Roles, "-duration", d.String())
	p := c.Topo.Start(t, c.Topo.Node, launcherOpts(), argv...)
	waitStdout(t, p, 60*time.Second, `"kind":"`+evReady+`"`)
	return p
}

// asNobody is the launcher's prefix: a private /dev/net/tun at 0666 in a
// mount namespace of its own (the host's node is never changed), then
// setpriv down to nobody with no capabilities, as nstest does for
// ProcOpts.User. Every wrapper execs the next.
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
	return tundev.Wrap(t.TempDir(), 0o666, "setpriv", "--reuid="+u.Uid, "--regid="+u.Gid, "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--pdeathsig=KILL", "--")
}

// launcherOpts: no proxy from the test host, no 1 s exit sleep in the
// race-built job, a HOME nobody can use.
func launcherOpts() nstest.ProcOpts {
	env := []string{"HOME=/tmp", "GORACE=atexit_sleep_ms=0"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	return nstest.ProcOpts{Env: env}
}
