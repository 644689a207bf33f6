package bench

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

const (
	// benchEnv must be "1" for anything to run: a plain "go test ./..."
	// skips the package at once and builds nothing.
	benchEnv = "MESHLAUNCH_BENCH"
	// nstestRoleEnv makes a copy of the test binary run an nstest role
	// (nstest's contract with Main); roleEnv runs one of this package's
	// roles (roles_test.go) instead.
	nstestRoleEnv = "NSTEST_ROLE"
	roleEnv       = "BENCH_ROLE"
)

// Binaries the benchmark installs into its own directory: built or
// copied once in TestMain and kept open, so nothing is left behind however
// the process ends (nstest.Main exits without returning).
var (
	meshlaunchBin *os.File // meshlaunch, built like "make build"
	testBin       *os.File // this test binary, for the roles
	moduleDir     string   // the module root: docs/ is written there
	buildVersion  string   // the version stamped into meshlaunch
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	if os.Getenv(nstestRoleEnv) == "" && enabled() && os.Geteuid() == 0 {
		if err := openBinaries(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
	}
	nstest.Main(m) // runs an nstest role and exits, or runs the tests and exits
}

func enabled() bool { return os.Getenv(benchEnv) == "1" }

// openBinaries builds meshlaunch and opens it and the test binary.
func openBinaries() error {
	var err error
	if moduleDir, err = moduleRoot(); err != nil {
		return err
	}
	if meshlaunchBin, err = buildMeshlaunch(moduleDir); err != nil {
		return err
	}
	if testBin, err = os.Open("/proc/self/exe"); err != nil {
		return fmt.Errorf("open test binary: %w", err)
	}
	return nil
}

// buildMeshlaunch builds meshlaunch as "make build" does (static,
// -trimpath, version from git describe) into a temporary directory,
// opens it and removes the directory.
func buildMeshlaunch(root string) (*os.File, error) {
	buildVersion = "dev"
	if out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
		buildVersion = strings.TrimSpace(string(out))
	}
	dir, err := os.MkdirTemp("", "bench-build-")
	if err != nil {
		return nil, fmt.Errorf("build meshlaunch: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "meshlaunch")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-X main.version="+buildVersion, "-o", path, "./cmd/meshlaunch")
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
	if src == nil {
		t.Fatal("binaries not prepared: TestMain prepares them as root with " + benchEnv + "=1 only")
	}
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

// sharedDir is a directory every user can read and traverse, removed at
// t's cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
