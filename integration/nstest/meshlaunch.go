package nstest

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
)

// BuildMeshlaunch builds a static meshlaunch (CGO_ENABLED=0) from
// ./cmd/meshlaunch of the module root, with buildFlags added to "go build"
// (for example "-trimpath"). It builds into a temporary directory and
// removes that directory before returning the binary open: nothing is left
// behind however the test process ends (Main exits without returning).
//
// Call it once from TestMain, only where tests will use it (as root; a
// process that runs a role needs none):
//
//	var meshlaunchBin *os.File
//
//	func TestMain(m *testing.M) {
//		if os.Getenv(nstest.RoleEnv) == "" && os.Geteuid() == 0 {
//			var err error
//			if meshlaunchBin, err = nstest.BuildMeshlaunch(); err != nil {
//				fmt.Fprintf(os.Stderr, "mypkg: %v\n", err)
//				os.Exit(1)
//			}
//		}
//		nstest.Main(m)
//	}
//
// Tests then copy it where they need it with Install, or pass it to
// NewMeshCluster.
func BuildMeshlaunch(buildFlags ...string) (*os.File, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nstest-build-")
	if err != nil {
		return nil, fmt.Errorf("build meshlaunch: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "meshlaunch")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(append([]string{"build"}, buildFlags...), "-o", path, "./cmd/meshlaunch")
	cmd := exec.CommandContext(ctx, "go", args...)
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

// ModuleRoot is the directory of the go.mod that holds the package under
// test.
func ModuleRoot() (string, error) {
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

// Install copies src, a binary from BuildMeshlaunch, into dir as name,
// executable by every user, and returns its path. A nil src fails t:
// TestMain prepares binaries only where tests can use them.
func Install(t testing.TB, dir, name string, src *os.File) string {
	t.Helper()
	if src == nil {
		t.Fatal("nstest: binaries not prepared: TestMain prepares them as root only")
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
		t.Fatalf("nstest: install %s: %v", name, err)
	}
	return path
}

// installTestBinary copies the running test binary into dir as name,
// like Install: a copy in a directory every user can read runs the test
// package's own roles as nobody (the go build directory holding the
// original is 0700).
func installTestBinary(t testing.TB, dir, name string) string {
	t.Helper()
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatalf("nstest: open test binary: %v", err)
	}
	defer f.Close()
	return Install(t, dir, name, f)
}
