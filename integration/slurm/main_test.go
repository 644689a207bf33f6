package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// gateEnv must be "1" for the SLURM test to run (make e2e-slurm sets it).
const gateEnv = "MESHLAUNCH_E2E_SLURM"

// meshlaunchBin is meshlaunch, built by TestMain when the SLURM test will
// run, then unlinked and kept open so that nothing is left behind however
// the process ends (nstest.Main exits without returning).
var meshlaunchBin *os.File

func TestMain(m *testing.M) {
	if os.Getenv("NSTEST_ROLE") == "" && e2eSkipReason() == "" {
		f, err := buildMeshlaunch()
		if err != nil {
			fmt.Fprintf(os.Stderr, "slurm: %v\n", err)
			os.Exit(1)
		}
		meshlaunchBin = f
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

// buildMeshlaunch builds a static meshlaunch from the module root into a
// temporary directory, opens it and removes the directory.
func buildMeshlaunch() (*os.File, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "slurm-build-")
	if err != nil {
		return nil, fmt.Errorf("build meshlaunch: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "meshlaunch")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", path, "./cmd/meshlaunch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/meshlaunch: %w\n%s", err, out)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("build meshlaunch: %w", err)
	}
	return f, nil
}

// moduleRoot is the directory of the go.mod that holds this package.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// install copies src into dir as name, executable by every user, and
// returns its path.
func install(t *testing.T, dir, name string, src *os.File) string {
	t.Helper()
	st, err := src.Stat()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(out, io.NewSectionReader(src, 0, st.Size()))
	if err = errors.Join(err, out.Close()); err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
	return path
}
