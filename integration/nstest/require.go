package nstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

var (
	requireOnce sync.Once
	skipReason  string // "" when namespaces can be built; set once
)

// Require skips t unless the process runs as root, iproute2's ip is
// installed and "ip netns add" works. The check runs once per process and
// its result is cached. Every test that uses the package calls it first
// (NewTopology calls it too).
func Require(t testing.TB) {
	t.Helper()
	requireOnce.Do(func() { skipReason = probeEnvironment() })
	if skipReason != "" {
		t.Skip("nstest: namespace tier skipped: " + skipReason)
	}
}

// probeEnvironment returns why namespaces cannot be built, or "".
func probeEnvironment() string {
	if os.Geteuid() != 0 {
		return "needs root to create network namespaces (CI runs the tier as root)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "iproute2's ip is not installed"
	}
	name := fmt.Sprintf("mlreq%d", os.Getpid()%1000000)
	out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("ip netns add failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns del %s failed: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return ""
}

// lookPathOrSkip returns the path of program, or skips t naming the Debian
// package that provides it.
func lookPathOrSkip(t testing.TB, program, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		t.Skipf("nstest: %s not installed (apt-get install %s): %v", program, debianPackage, err)
	}
	return p
}
