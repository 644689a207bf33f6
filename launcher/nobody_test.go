package launcher_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/tundev"
)

// The namespace tests are only meaningful for an unprivileged user. CI runs
// as root, so each such test re-runs itself, in a world-readable copy of the
// test binary, as nobody with no capabilities (setpriv), and passes or fails
// with that run.

const (
	nobodyEnv = "MESHLAUNCH_TEST_AS_NOBODY"
	nobodyUID = 65534
)

// tunMode says what a test needs of /dev/net/tun's mode.
type tunMode int

const (
	tunOpen   tunMode = iota // 0666: nobody may open it
	tunClosed                // 0600: nobody may not
)

// asNobody returns true when the test already runs as nobody; otherwise it
// runs the test as nobody with /dev/net/tun set to mode, reports that run's
// result, and returns false.
func asNobody(t *testing.T, mode tunMode) bool {
	t.Helper()
	if os.Getenv(nobodyEnv) == "1" {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the launcher as user nobody")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to run the launcher as user nobody")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux) to give the test its own /dev/net/tun mode")
	}
	bin := binaryCopy(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	perm := os.FileMode(0o666)
	if mode == tunClosed {
		perm = 0o600
	}
	argv := tundev.Wrap(t.TempDir(), perm, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all",
		bin, "-test.run", runPattern(t.Name()), "-test.v", "-test.count=1")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), nobodyEnv+"=1", "TMPDIR=/tmp", "HOME=/tmp")
	if os.Getenv("GORACE") == "" {
		// A race-enabled binary sleeps 1 s when it exits 0; the namespace
		// child is one, and every test would wait for it.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("test as nobody: %v", err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skip("skipped as nobody")
	}
	return false
}

// runPattern selects exactly the test (or subtest) name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

var binCopy struct {
	sync.Mutex
	dir, path string
}

// binaryCopy copies the test binary to a 0755 directory nobody can reach.
// It is removed by TestMain.
func binaryCopy(t *testing.T) string {
	binCopy.Lock()
	defer binCopy.Unlock()
	if binCopy.path != "" {
		return binCopy.path
	}
	dir, err := os.MkdirTemp("", "meshlaunch-test-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "launcher.test")
	if err := copyExecutable(path); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	binCopy.dir, binCopy.path = dir, path
	return path
}

func copyExecutable(dst string) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func removeBinaryCopy() {
	binCopy.Lock()
	defer binCopy.Unlock()
	if binCopy.dir != "" {
		os.RemoveAll(binCopy.dir)
	}
}
