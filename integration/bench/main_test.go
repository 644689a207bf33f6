package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const (
	// benchEnv must be "1" for anything to run: a plain "go test ./..."
	// skips the package at once and builds nothing.
	benchEnv = "MESHLAUNCH_BENCH"
	// roleEnv runs one of this package's roles (roles_test.go) in a copy
	// of the test binary; nstest.RoleEnv runs one of nstest's.
	roleEnv = "BENCH_ROLE"
)

// Set up once in TestMain, as root with MESHLAUNCH_BENCH=1 only.
var (
	meshlaunchBin *os.File // meshlaunch, built like "make build" (nstest.BuildMeshlaunch)
	moduleDir     string   // the module root: docs/ is written there
	buildVersion  string   // the version stamped into meshlaunch
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	if os.Getenv(nstest.RoleEnv) == "" && enabled() && os.Geteuid() == 0 {
		if err := buildMeshlaunch(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs an nstest role and exits, or runs the tests and exits
}

func enabled() bool { return os.Getenv(benchEnv) == "1" }

// buildMeshlaunch builds meshlaunch as "make build" does: static,
// -trimpath, version from git describe.
func buildMeshlaunch() error {
	var err error
	if moduleDir, err = nstest.ModuleRoot(); err != nil {
		return err
	}
	buildVersion = "dev"
	if out, err := exec.Command("git", "-C", moduleDir, "describe", "--always", "--dirty").Output(); err == nil {
		buildVersion = strings.TrimSpace(string(out))
	}
	meshlaunchBin, err = nstest.BuildMeshlaunch("-trimpath", "-ldflags", "-X main.version="+buildVersion)
	return err
}
