package nstest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RoleEnv names the helper role a re-executed test binary runs: a
// TestMain sees it set in a process that Main turns into that role, and
// a job can run a role by setting it for the copy of the test binary
// (MeshOpts.Roles).
const RoleEnv = "NSTEST_ROLE"

// roles are the helpers a re-executed test binary can run; each gets the
// arguments after argv[0] and returns when it is done or has failed.
var roles = map[string]func(args []string) error{
	"httpecho":  runHTTPEcho,     // ADDR: body is the client's address; /bytes?n=N
	"tcpecho":   runTCPEcho,      // ADDR
	"udpecho":   runUDPEcho,      // ADDR
	"probe":     runProbe,        // ADDR TIMEOUT: exit 0 once a TCP connect works
	"dnsq":      runDNSQuery,     // SERVER NAME TIMEOUT: print A/AAAA answers
	"upgrade":   runUpgradeProbe, // URL [CAFILE]: HTTP upgrade round trip through proxies
	"echocheck": runEchoCheck,    // tcp|udp ADDR: one message round trip through an echo server
}

var mainCalled atomic.Bool // Main is running the tests, roles can be used

// Main is called from TestMain by every test package that uses nstest:
//
//	func TestMain(m *testing.M) { nstest.Main(m) }
//
// In a process started by StartRole it runs the role named by
// $NSTEST_ROLE and exits. Otherwise it runs the tests, removes the
// world-readable copy of the test binary, checks for leaked goroutines
// (goleak, ignoring the spawner: see IgnoreSpawner) and exits with the
// tests' status.
func Main(m *testing.M) {
	if role := os.Getenv(RoleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	mainCalled.Store(true)
	code := m.Run()
	if err := removeRoleBinary(); err != nil {
		fmt.Fprintf(os.Stderr, "nstest: %v\n", err)
		code = max(code, 1)
	}
	if code == 0 {
		if err := goleak.Find(IgnoreSpawner()); err != nil {
			fmt.Fprintf(os.Stderr, "nstest: goroutines leaked by the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runRole runs a role and returns the process exit status.
func runRole(role string, args []string) int {
	fn, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "nstest: unknown role %q (have %s)\n", role, strings.Join(roleNames(), ", "))
		return 2
	}
	if err := fn(args); err != nil {
		fmt.Fprintf(os.Stderr, "nstest: role %s: %v\n", role, err)
		return 1
	}
	return 0
}

func roleNames() []string { return slices.Sorted(maps.Keys(roles)) }

// usage is the error of a role called with the wrong arguments.
func usage(synopsis string, args []string) error {
	return fmt.Errorf("usage: %s (got %q)", synopsis, args)
}

// StartRole runs helper role (httpecho, tcpecho, udpecho, …) in ns as user
// ("" is root) from a copy of the test binary that every user can execute.
func (tp *Topology) StartRole(t testing.TB, ns, user, role string, args ...string) *Proc {
	t.Helper()
	bin := roleBinaryOrFatal(t)
	opts := ProcOpts{User: user, Env: roleEnvironment(nil, role)}
	p, err := tp.start(t, ns, role, opts, append([]string{bin}, args...))
	if err != nil {
		t.Fatalf("nstest: start role %s %q in %s: %v", role, args, ns, err)
	}
	return p
}

// RunRole runs a short-lived role (probe, dnsq, upgrade) like Run.
func (tp *Topology) RunRole(t testing.TB, ns string, opts ProcOpts, role string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin := roleBinaryOrFatal(t)
	opts.Env = roleEnvironment(opts.Env, role)
	return tp.Run(t, ns, opts, append([]string{bin}, args...)...)
}

// WaitTCP waits until a TCP connection from inside ns to addr succeeds,
// and fails t after timeout.
func (tp *Topology) WaitTCP(t testing.TB, ns, addr string, timeout time.Duration) {
	t.Helper()
	_, stderr, code := tp.RunRole(t, ns, ProcOpts{Timeout: timeout + 10*time.Second}, "probe", addr, timeout.String())
	if code != 0 {
		t.Fatalf("nstest: %s not reachable from %s within %v: %s", addr, ns, timeout, strings.TrimSpace(stderr))
	}
}

// CanDialTCP reports whether one TCP connection from inside ns to addr
// succeeds within timeout: the building block of isolation checks.
func (tp *Topology) CanDialTCP(t testing.TB, ns, user, addr string, timeout time.Duration) bool {
	t.Helper()
	_, _, code := tp.RunRole(t, ns, ProcOpts{User: user, Timeout: timeout + 10*time.Second}, "probe", addr, timeout.String())
	return code == 0
}

// roleEnvironment is env plus what a role process needs: its name, and,
// in a -race build, no 1 s sleep at exit (the race runtime's default
// atexit_sleep_ms), which would add a second to every probe.
func roleEnvironment(env []string, role string) []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append(append([]string(nil), env...), RoleEnv+"="+role, "GORACE="+gorace)
}

var roleBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// roleBinaryOrFatal returns the path of a copy of the test binary in a
// 0755 directory: the go build directory holding the original is 0700, so
// a process dropped to nobody could not execute it.
func roleBinaryOrFatal(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("nstest: roles need TestMain to call nstest.Main(m)")
	}
	roleBin.once.Do(func() { roleBin.dir, roleBin.path, roleBin.err = copyExecutable() })
	if roleBin.err != nil {
		t.Fatalf("nstest: %v", roleBin.err)
	}
	return roleBin.path
}

func copyExecutable() (dir, path string, err error) {
	src, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("find test binary: %w", err)
	}
	dir, err = worldReadableDir("nstest-bin-")
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(dir, "nstest-roles")
	if err := copyFile(path, src, 0o755); err != nil {
		return dir, "", fmt.Errorf("copy test binary: %w", err)
	}
	return dir, path, nil
}

func removeRoleBinary() error {
	if roleBin.dir == "" {
		return nil
	}
	if err := os.RemoveAll(roleBin.dir); err != nil {
		return fmt.Errorf("remove copy of test binary: %w", err)
	}
	return nil
}
