package nstest

import (
	"os/exec"
	"runtime"
	"sync"

	"go.uber.org/goleak"
)

// Children are started with a parent-death signal (SIGKILL), so that a
// crashed or timed-out test binary does not leave nginx or dnsmasq
// running. The kernel sends it when the *thread* that forked the child
// exits (prctl(2), PR_SET_PDEATHSIG), and Go ends a thread whenever a
// goroutine exits while locked to it, as setns-based test code does. So
// every child is forked from one locked thread that lives as long as the
// process.
var spawner struct {
	once sync.Once
	reqs chan func()
}

// startCmd runs cmd.Start on the spawner thread.
func startCmd(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan func())
		go runSpawner(spawner.reqs)
	})
	errc := make(chan error, 1)
	spawner.reqs <- func() { errc <- cmd.Start() }
	return <-errc
}

// runSpawner never returns and never unlocks: its thread must not exit.
func runSpawner(reqs <-chan func()) {
	runtime.LockOSThread()
	for f := range reqs {
		f()
	}
}

// IgnoreSpawner is the goleak option for the one goroutine nstest keeps
// for the life of the process (see startCmd); Main applies it already,
// tests that call goleak.VerifyNone themselves pass it too.
func IgnoreSpawner() goleak.Option {
	return goleak.IgnoreAnyFunction("github.com/meshlaunch/meshlaunch/integration/nstest.runSpawner")
}
