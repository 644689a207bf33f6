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

// launcher is one "meshlaunch run" of the soak and its job.
type launcher struct {
	peer
	proc *nstest.Proc
}

// startLaunchers starts one launcher per peer of the sidecar, the main
// one (the pod IP) first; each returns once its job is ready.
func (c *cluster) startLaunchers(t *testing.T, d time.Duration) []*launcher {
	t.Helper()
	ls := make([]*launcher, 0, len(c.peers))
	for _, p := range c.peers {
		ls = append(ls, c.startLauncher(t, p, d))
	}
	return ls
}

// startLauncher runs "meshlaunch run" in the node namespace as nobody
// with no capabilities, through the relay, with p's key and the job role
// for d; it returns once the job is ready (the main job: serves its
// exposed port). Cleanup stops it.
func (c *cluster) startLauncher(t *testing.T, p peer, d time.Duration) *launcher {
	t.Helper()
	argv := append(asNobody(t), c.Bin, "run", "--server", c.server, "--ca-file", c.Ingress.CAFile,
		"--token-file", c.Token, "--private-key-file", p.keyFile, "--wait", "30s",
		"--", "env", roleEnv+"=job", c.Roles, "-duration", d.String())
	if !p.main {
		argv = append(argv, "-extra")
	}
	proc := c.Topo.Start(t, c.Topo.Node, launcherOpts(), argv...)
	waitStdout(t, proc, 60*time.Second, `"kind":"`+evReady+`"`)
	return &launcher{peer: p, proc: proc}
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
