package launcher_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// launcherProc is this test binary running as a stand-alone launcher.
type launcherProc struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
}

// startLauncher runs the launcher role with the job `sh -c script` and
// waits until the job prints "ready".
func startLauncher(t *testing.T, killGrace time.Duration, script string) *launcherProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "sh", "-c", script)
	cmd.Env = append(os.Environ(), roleEnv+"="+roleLauncher, killGraceEnv+"="+killGrace.String())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	p := &launcherProc{cmd: cmd, lines: bufio.NewScanner(stdout)}
	if !p.lines.Scan() || p.lines.Text() != "ready" {
		t.Fatalf("job did not get ready: %q %v", p.lines.Text(), p.lines.Err())
	}
	return p
}

// wait returns the launcher's exit code and how long it took.
func (p *launcherProc) wait(t *testing.T) (int, time.Duration) {
	t.Helper()
	for p.lines.Scan() { // drain until the job's stdout closes
	}
	start := time.Now()
	err := p.cmd.Wait()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("wait for launcher: %v", err)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

func TestSignalReachesJob(t *testing.T) {
	if !asNobody(t, tunOpen) {
		return
	}
	p := startLauncher(t, 10*time.Second, `trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
	p.cmd.Process.Signal(unix.SIGTERM)
	if code, _ := p.wait(t); code != 7 {
		t.Errorf("launcher exit code = %d, want 7 (the job's SIGTERM trap)", code)
	}
}

func TestKillGrace(t *testing.T) {
	if !asNobody(t, tunOpen) {
		return
	}
	const grace = 500 * time.Millisecond
	p := startLauncher(t, grace, `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	start := time.Now()
	p.cmd.Process.Signal(unix.SIGTERM)
	code, _ := p.wait(t)
	if code != 128+9 {
		t.Errorf("launcher exit code = %d, want %d (SIGKILL after the grace)", code, 128+9)
	}
	if d := time.Since(start); d < grace || d > grace+5*time.Second {
		t.Errorf("job killed after %v, want about %v", d, grace)
	}
}

// uniqueSleep is a sleep argument that marks this test's processes.
func uniqueSleep() string {
	return fmt.Sprintf("%d.%06d", 3000+os.Getpid()%1000, time.Now().Nanosecond()/1000)
}

func TestLauncherSIGKILLLeavesNothing(t *testing.T) {
	if !asNobody(t, tunOpen) {
		return
	}
	mark := uniqueSleep()
	script := fmt.Sprintf(`setsid sh -c 'sleep %s' </dev/null >/dev/null 2>&1 &
sleep %s & echo ready; wait`, mark, mark)
	p := startLauncher(t, 10*time.Second, script)
	if !waitFor(5*time.Second, func() bool { return len(markerProcs("sleep\x00"+mark)) == 2 }) {
		t.Fatalf("job and daemon not both running: %v", markerProcs(mark))
	}
	p.cmd.Process.Kill()
	p.wait(t)
	if !waitFor(5*time.Second, func() bool { return len(markerProcs(mark)) == 0 }) {
		t.Errorf("processes survived the launcher's SIGKILL: %v", markerProcs(mark))
	}
}

func TestDaemonKilledWhenJobExits(t *testing.T) {
	if !asNobody(t, tunOpen) {
		return
	}
	mark := uniqueSleep()
	release := t.TempDir() + "/release"
	script := fmt.Sprintf(`setsid sh -c 'sleep %s' </dev/null >/dev/null 2>&1 &
while [ ! -e %s ]; do sleep 0.02; done; exit 0`, mark, release)
	cfg := testConfig()
	j, _ := startJob(t, cfg, "sh", "-c", script)
	if err := j.Go(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return len(markerProcs("sleep\x00"+mark)) == 1 }) {
		t.Fatalf("daemon never ran: %v", markerProcs(mark))
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, err := j.Wait()
	if err != nil || code != 0 {
		t.Fatalf("job exit = %d, %v; want 0", code, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("launcher took %v to return after the job exited", d)
	}
	if pids := markerProcs(mark); len(pids) != 0 {
		t.Errorf("daemon survived the job: %v", pids)
	}
}
