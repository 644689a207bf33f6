package nstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/meshlaunch/meshlaunch/internal/tundev"
)

// AsUserWithTUN is the start of a command line that runs the rest as user
// (a name or "uid:gid") with no capabilities at all, as ProcOpts.User
// does, and with /dev/net/tun of the given mode in a private mount
// namespace (tundev.Wrap), so the machine's node is never changed and
// parallel tests may each want another mode. Every wrapper execs the
// next, so the process's pid ends up the command's own. It skips t where
// the tools or the device are missing.
func AsUserWithTUN(t testing.TB, user string, mode os.FileMode) []string {
	t.Helper()
	if _, err := os.Stat(tundev.Path); err != nil {
		t.Skipf("no %s: %v", tundev.Path, err)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("needs unshare (util-linux): %v", err)
	}
	priv, err := setprivArgs(user)
	if err != nil {
		t.Skipf("%v", err)
	}
	return tundev.Wrap(t.TempDir(), mode, priv...)
}

// ClientEnv is the environment for launchers and tunnels: no proxy (the
// test host's must not leak in), no 1 s exit sleep in race-built role
// jobs, and a HOME every user can use.
func ClientEnv() []string {
	env := []string{"HOME=/tmp", "GORACE=atexit_sleep_ms=0"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	return env
}
