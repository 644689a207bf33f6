package launcher_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshlaunch/meshlaunch/launcher/child"
)

// TestMain dispatches, in this order: the launcher's namespace child (the
// test binary is what /proc/self/exe re-executes), a test role (the binary
// run as a job or as a stand-alone launcher), or the tests.
func TestMain(m *testing.M) {
	child.MaybeRun()
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	code := m.Run()
	removeBinaryCopy()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
