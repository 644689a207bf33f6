package nsfaults

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/tundev"
)

const nobody = "nobody"

// runArgv is "meshlaunch run" against server with job, in the node
// namespace: as root, a private /dev/net/tun at 0666 (tundev.Wrap), then
// down to nobody with no capabilities, then meshlaunch. Every wrapper
// execs the next, so the pid is the launcher's.
func (c *cluster) runArgv(t *testing.T, server string, job ...string) []string {
	t.Helper()
	argv := append(asNobody(t), c.Bin, "run", "--server", server, "--ca-file", c.Ingress.CAFile,
		"--token-file", c.Token, "--wait", "30s", "--")
	return append(argv, job...)
}

// startLauncher runs "meshlaunch run" with job in the background; cleanup
// stops it.
func (c *cluster) startLauncher(t *testing.T, server string, job ...string) *nstest.Proc {
	t.Helper()
	p := c.Topo.Start(t, c.Topo.Node, clientEnv(), c.runArgv(t, server, job...)...)
	wantMeshlaunchPid(t, p)
	return p
}

// startTunnel runs "meshlaunch tunnel" against server with args as
// nobody in the node namespace; cleanup stops it.
func (c *cluster) startTunnel(t *testing.T, server string, args ...string) *nstest.Proc {
	t.Helper()
	opts := clientEnv()
	opts.User = nobody
	argv := append([]string{c.Bin, "tunnel", "--server", server, "--ca-file", c.Ingress.CAFile,
		"--token-file", c.Token}, args...)
	return c.Topo.Start(t, c.Topo.Node, opts, argv...)
}

// roleJob is a job that runs this package's role with args.
func (c *cluster) roleJob(role string, args ...string) string {
	return "env " + roleEnv + "=" + role + " " + c.Roles + " " + strings.Join(args, " ")
}

// asNobody is the launcher's prefix: a private /dev/net/tun at 0666,
// then setpriv to nobody with no capabilities at all.
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

// clientEnv is the environment of launchers and tunnels: no proxy (the
// test host's must not leak in), no 1 s exit sleep in race-built role
// jobs, and a HOME nobody can use.
func clientEnv() nstest.ProcOpts {
	env := []string{"HOME=/tmp", "GORACE=atexit_sleep_ms=0"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	return nstest.ProcOpts{Env: env}
}

// wantMeshlaunchPid checks that p's pid is meshlaunch itself, not a
// wrapper, once the exec chain has ended.
func wantMeshlaunchPid(t *testing.T, p *nstest.Proc) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid()))
		if err == nil && strings.HasSuffix(exe, "/meshlaunch") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d runs %q (%v), want meshlaunch\nstderr:\n%s", p.Pid(), exe, err, p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExit waits for the launcher and fails t unless it exits 0.
func waitExit(t *testing.T, p *nstest.Proc, timeout time.Duration) {
	t.Helper()
	code, err := p.Wait(timeout)
	if err != nil || code != 0 {
		t.Fatalf("%s: exit %d, %v\nstdout:\n%s\nstderr:\n%s", p.Name(), code, err, p.Stdout(), p.Stderr())
	}
}

// outputLine returns the first line of out that starts with prefix+" ",
// without the prefix, or fails t.
func outputLine(t *testing.T, out, prefix string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), prefix+" "); ok {
			return rest
		}
	}
	t.Fatalf("no %q line in the job's output:\n%s", prefix, out)
	return ""
}

// nstestRoot runs a short command as root, bounded to 30 s.
func nstestRoot() nstest.ProcOpts { return nstest.ProcOpts{Timeout: 30 * time.Second} }
