package soak

import (
	"fmt"
	"os"
	"testing"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// roleEnv runs one of this package's roles in a copy of the test binary;
// nstest.RoleEnv runs an nstest role instead.
const roleEnv = "SOAK_ROLE"

// roles are this package's helpers; each gets the arguments after argv[0].
var roles = map[string]func(args []string) error{
	"job":   runJob,   // FLAGS: the traffic mix, run as the launcher's job
	"relay": runRelay, // TARGET: faultrelay on 127.0.0.1; SIGUSR1 resets every connection
}

// meshlaunchBin is meshlaunch, built once by TestMain (nstest.BuildMeshlaunch).
var meshlaunchBin *os.File

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	if os.Getenv(nstest.RoleEnv) == "" && os.Geteuid() == 0 && os.Getenv(soakEnv) != "" {
		var err error
		if meshlaunchBin, err = nstest.BuildMeshlaunch(); err != nil {
			fmt.Fprintf(os.Stderr, "soak: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs an nstest role and exits, or runs the tests and exits
}

// runRole runs a role and returns the process exit status.
func runRole(role string, args []string) int {
	fn, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "soak: unknown role %q\n", role)
		return 2
	}
	if err := fn(args); err != nil {
		fmt.Fprintf(os.Stderr, "soak: role %s: %v\n", role, err)
		return 1
	}
	return 0
}
