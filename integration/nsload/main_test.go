package nsload

import (
	"fmt"
	"os"
	"testing"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// roleEnv runs one of this package's roles in a copy of the test binary;
// nstest.RoleEnv runs one of nstest's.
const roleEnv = "NSLOAD_ROLE"

// roles are this package's helpers; each gets the arguments after
// argv[0].
var roles = map[string]func(args []string) error{
	"sumserver": runSumServer, // ADDR: the load protocol's server (wire_test.go)
	"worker":    runWorker,    // commands on stdin, reports on stdout (worker_test.go)
}

// meshlaunchBin is meshlaunch, built once by TestMain
// (nstest.BuildMeshlaunch) and installed by every test into its own
// cluster's directory.
var meshlaunchBin *os.File

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	if os.Getenv(nstest.RoleEnv) == "" && os.Geteuid() == 0 {
		var err error
		if meshlaunchBin, err = nstest.BuildMeshlaunch(); err != nil {
			fmt.Fprintf(os.Stderr, "nsload: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs an nstest role and exits, or runs the tests and exits
}

// runRole runs a role and returns the process exit status.
func runRole(role string, args []string) int {
	fn, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "nsload: unknown role %q\n", role)
		return 2
	}
	if err := fn(args); err != nil {
		fmt.Fprintf(os.Stderr, "nsload: role %s: %v\n", role, err)
		return 1
	}
	return 0
}

// usage is the error of a role called with the wrong arguments.
func usage(synopsis string, args []string) error {
	return fmt.Errorf("usage: %s (got %q)", synopsis, args)
}
