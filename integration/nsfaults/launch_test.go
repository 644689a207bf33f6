package nsfaults

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const nobody = "nobody"

// runArgv is "meshlaunch run" against server with job, in the node
// namespace: as root, a private /dev/net/tun at 0666 (tundev.Wrap), then
// down to nobody with no capabilities, then meshlaunch. Every wrapper
// execs the next, so the pid is the launcher's.
func (c *cluster) runArgv(t *testing.T, server string, job ...string) []string {
	t.Helper()
	argv := append(nstest.AsUserWithTUN(t, nobody, 0o666), c.Bin, "run", "--server", server, "--ca-file", c.Ingress.CAFile,
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

// clientEnv is the environment of launchers and tunnels (nstest.ClientEnv).
func clientEnv() nstest.ProcOpts { return nstest.ProcOpts{Env: nstest.ClientEnv()} }

// wantMeshlaunchPid checks that p's pid is meshlaunch itself, not a
// wrapper, once the exec chain has ended.
func wantMeshlaunchPid(t *testing.T, p *nstest.Proc) {
	t.Helper()
	p.WaitExe(t, 5*time.Second, "/meshlaunch")
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
