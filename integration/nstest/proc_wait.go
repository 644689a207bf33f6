package nstest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// WaitStdout waits until p's stdout holds every one of want and returns
// it; it fails t, with both outputs, if p exits first or timeout passes.
func (p *Proc) WaitStdout(t testing.TB, timeout time.Duration, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := p.Stdout()
		if containsAll(out, want) {
			return out
		}
		select {
		case <-p.Done():
			code, _ := p.Wait(time.Second)
			t.Fatalf("%s exited (%d) before printing %q\nstdout:\n%s\nstderr:\n%s", p.Name(), code, want, out, p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no %q within %v\nstdout:\n%s\nstderr:\n%s", p.Name(), want, timeout, out, p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitExe waits until p's pid runs an executable whose path ends in
// suffix: the end of an exec chain of wrappers (ip netns exec, unshare,
// setpriv), after which signals sent to p reach the program itself.
func (p *Proc) WaitExe(t testing.TB, timeout time.Duration, suffix string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid()))
		if err == nil && strings.HasSuffix(exe, suffix) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d runs %q (%v), want *%s\nstderr:\n%s", p.Pid(), exe, err, suffix, p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
