package slurm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// gateEnv must be "1" for the SLURM test to run (make e2e-slurm sets it).
const gateEnv = "MESHLAUNCH_E2E_SLURM"

// meshlaunchBin is meshlaunch, built by TestMain (nstest.BuildMeshlaunch)
// when the SLURM test will run.
var meshlaunchBin *os.File

func TestMain(m *testing.M) {
	if os.Getenv(nstest.RoleEnv) == "" && e2eSkipReason() == "" {
		var err error
		if meshlaunchBin, err = nstest.BuildMeshlaunch("-trimpath"); err != nil {
			fmt.Fprintf(os.Stderr, "slurm: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs an nstest role and exits, or runs the tests and exits
}

// requireE2E skips t unless the SLURM test is enabled and can run here:
// the gate, root and network namespaces (nstest.Require), and the SLURM
// and munge programs.
func requireE2E(t *testing.T) {
	t.Helper()
	if os.Getenv(gateEnv) != "1" {
		t.Skipf("the SLURM end-to-end test runs only with %s=1 (make e2e-slurm), as root, with slurm-wlm and munge installed", gateEnv)
	}
	nstest.Require(t)
	if reason := e2eSkipReason(); reason != "" {
		t.Skip(reason)
	}
	if meshlaunchBin == nil {
		t.Fatal("meshlaunch was not built in TestMain")
	}
}

// e2eSkipReason says why the SLURM test cannot run, or "".
func e2eSkipReason() string {
	switch {
	case os.Getenv(gateEnv) != "1":
		return gateEnv + " is not 1"
	case os.Geteuid() != 0:
		return "needs root"
	}
	for _, prog := range slurmPrograms {
		if _, err := findProgram(prog); err != nil {
			return fmt.Sprintf("%v (apt-get install --no-install-recommends slurm-wlm munge)", err)
		}
	}
	return ""
}

// slurmPrograms are the programs of slurm-wlm and munge the test runs.
var slurmPrograms = []string{"munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "scontrol", "scancel"}

// findProgram finds a program in PATH or in the sbin directories, where
// Debian puts the daemons and where a non-login root PATH may not look.
func findProgram(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed", name)
}
