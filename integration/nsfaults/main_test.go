package nsfaults

import (
	"fmt"
	"os"
	"testing"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// roleEnv runs one of this package's roles (roles_test.go) in a copy of
// the test binary; nstest.RoleEnv runs an nstest role instead.
const roleEnv = "NSFAULTS_ROLE"

// meshlaunchBin is meshlaunch, built once by TestMain (nstest.BuildMeshlaunch)
// and installed by every test into its own cluster's directory.
var meshlaunchBin *os.File

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	if os.Getenv(nstest.RoleEnv) == "" && os.Geteuid() == 0 {
		var err error
		if meshlaunchBin, err = nstest.BuildMeshlaunch(); err != nil {
			fmt.Fprintf(os.Stderr, "nsfaults: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs an nstest role and exits, or runs the tests and exits
}

// long skips t unless MESHLAUNCH_LONG=1: tests that run for minutes.
func long(t *testing.T) {
	t.Helper()
	if os.Getenv("MESHLAUNCH_LONG") != "1" {
		t.Skip("runs for minutes; set MESHLAUNCH_LONG=1 (make test-long)")
	}
}
