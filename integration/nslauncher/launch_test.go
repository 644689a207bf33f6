package nslauncher

import (
	"cmp"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// launch says how to run "meshlaunch run"; the zero value runs it with
// the cluster's secret, no extra flags and /dev/net/tun at 0666.
type launch struct {
	flags   []string      // extra flags of "meshlaunch run"
	env     []string      // extra environment of the launcher (and so of the job)
	token   string        // secret file; "" is the cluster's
	tunMode os.FileMode   // mode of /dev/net/tun the launcher sees; 0 is 0666
	timeout time.Duration // bounds run; 0 is 60 s
}

// argv is the launcher's command line in the node namespace: as root, a
// private /dev/net/tun (tundev.Wrap), then down to nobody with no
// capabilities, as nstest.ProcOpts{User: "nobody"} does, and meshlaunch.
// Every wrapper execs the next, so the pid is the launcher's.
func (c *cluster) argv(t *testing.T, l launch, job []string) []string {
	t.Helper()
	argv := append(asNobody(t, l), c.Bin, "run", "--server", c.Ingress.URL, "--ca-file", c.Ingress.CAFile,
		"--token-file", cmp.Or(l.token, c.Token), "--wait", "30s")
	argv = append(argv, l.flags...)
	return append(append(argv, "--"), job...)
}

// asNobody is the prefix of the launcher's command line: /dev/net/tun
// with l's mode (0666 by default) in a private mount namespace, then down
// to nobody with no capabilities (nstest.AsUserWithTUN).
func asNobody(t *testing.T, l launch) []string {
	t.Helper()
	return nstest.AsUserWithTUN(t, nobody, cmp.Or(l.tunMode, 0o666))
}

// procOpts is the launcher's environment: no proxy unless the test sets
// one (the test host's must not leak in), no 1 s exit sleep in race-built
// role jobs, and a HOME nobody can use.
func (l launch) procOpts() nstest.ProcOpts {
	env := []string{"HOME=/tmp", "GORACE=atexit_sleep_ms=0"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	return nstest.ProcOpts{Env: append(env, l.env...), Timeout: cmp.Or(l.timeout, 60*time.Second)}
}

// run runs the launcher with job in the node namespace and waits for it.
func (c *cluster) run(t *testing.T, l launch, job ...string) (stdout, stderr string, code int) {
	t.Helper()
	return c.Topo.Run(t, c.Topo.Node, l.procOpts(), c.argv(t, l, job)...)
}

// start runs the launcher with job in the node namespace in the
// background; cleanup stops it.
func (c *cluster) start(t *testing.T, l launch, job ...string) *nstest.Proc {
	t.Helper()
	p := c.Topo.Start(t, c.Topo.Node, l.procOpts(), c.argv(t, l, job)...)
	wantLauncherPid(t, p)
	return p
}

// wantLauncherPid checks that p's pid is meshlaunch itself, not a wrapper,
// so that signals sent to p reach the launcher.
func wantLauncherPid(t *testing.T, p *nstest.Proc) {
	t.Helper()
	p.WaitExe(t, 5*time.Second, "/meshlaunch")
}

// waitOutput waits until p's stdout holds every one of want
// (nstest.Proc.WaitStdout).
func waitOutput(t *testing.T, p *nstest.Proc, timeout time.Duration, want ...string) {
	t.Helper()
	p.WaitStdout(t, timeout, want...)
}

// roleJob is a job that runs nstest role with args from the copy of the
// test binary; the launcher passes its environment through to the job.
func (c *cluster) roleJob(role string, args ...string) []string {
	return append([]string{"env", nstest.RoleEnv + "=" + role, c.Roles}, args...)
}
