package soak

import (
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
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
	argv := append(nstest.AsUserWithTUN(t, nobody, 0o666), c.Bin, "run", "--server", c.server, "--ca-file", c.Ingress.CAFile,
		"--token-file", c.Token, "--private-key-file", p.keyFile, "--wait", "30s",
		"--", "env", roleEnv+"=job", c.Roles, "-duration", d.String())
	if !p.main {
		argv = append(argv, "-extra")
	}
	proc := c.Topo.Start(t, c.Topo.Node, launcherOpts(), argv...)
	waitStdout(t, proc, 60*time.Second, `"kind":"`+evReady+`"`)
	return &launcher{peer: p, proc: proc}
}

// launcherOpts: no proxy from the test host, no 1 s exit sleep in the
// race-built job, a HOME nobody can use.
func launcherOpts() nstest.ProcOpts { return nstest.ProcOpts{Env: nstest.ClientEnv()} }
