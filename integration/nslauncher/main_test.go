package nslauncher

import (
	"fmt"
	"os"
	"testing"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// meshlaunchBin is meshlaunch, built once by TestMain (nstest.BuildMeshlaunch)
// and installed by every test into its own cluster's directory.
var meshlaunchBin *os.File

func TestMain(m *testing.M) {
	if os.Getenv(nstest.RoleEnv) == "" && os.Geteuid() == 0 {
		var err error
		if meshlaunchBin, err = nstest.BuildMeshlaunch(); err != nil {
			fmt.Fprintf(os.Stderr, "nslauncher: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs a role and exits, or runs the tests and exits
}
