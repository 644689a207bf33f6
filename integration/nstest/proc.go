package nstest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ProcOpts says how to run a process in a namespace. The zero value runs
// it as root with the test's environment.
type ProcOpts struct {
	// User, if set, runs the process as that user with no capabilities at
	// all (inheritable and bounding sets cleared, no_new_privs) through
	// setpriv: a name ("nobody"), a uid ("65534", group from the password
	// database or equal to the uid) or "uid:gid".
	User string
	// Env is appended to the test process's environment (later wins).
	Env []string
	// Dir is the working directory; "" is the test's.
	Dir string
	// Stdin feeds the process; nil is /dev/null.
	Stdin io.Reader
	// Timeout bounds Run; 0 means 30 s. Start ignores it.
	Timeout time.Duration
}

// stopGrace is how long a process has between SIGTERM and SIGKILL at
// cleanup.
const stopGrace = 3 * time.Second

// Proc is a process started by Start or StartRole. It runs in its own
// process group, which is sent SIGTERM, then SIGKILL after 3 s, at the
// cleanup of the test that started it. Its methods are safe for concurrent
// use.
type Proc struct {
	name       string // namespace/program, for messages
	t          testing.TB
	cmd        *exec.Cmd
	stdoutPath string
	stderrPath string
	done       chan struct{} // closed once the process is reaped
	code       int           // valid after done
	waitErr    error         // valid after done
}

// Start runs argv in namespace ns through "ip netns exec" (so
// /etc/netns/<ns>/resolv.conf applies) and returns at once. Output goes to
// files under t.TempDir(); their tails are logged if t fails.
func (tp *Topology) Start(t testing.TB, ns string, opts ProcOpts, argv ...string) *Proc {
	t.Helper()
	p, err := tp.start(t, ns, "", opts, argv)
	if err != nil {
		t.Fatalf("nstest: start %q in %s: %v", argv, ns, err)
	}
	return p
}

// start is Start returning its error; name ("" is argv[0]'s base name)
// labels the process in messages.
func (tp *Topology) start(t testing.TB, ns, name string, opts ProcOpts, argv []string) (*Proc, error) {
	cmd, err := tp.command(ns, opts, argv)
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	p := &Proc{
		name:       ns + "/" + cmp.Or(name, filepath.Base(argv[0])),
		t:          t,
		cmd:        cmd,
		stdoutPath: filepath.Join(dir, "stdout"),
		stderrPath: filepath.Join(dir, "stderr"),
		done:       make(chan struct{}),
	}
	if err := p.startWithFiles(); err != nil {
		return nil, err
	}
	go p.wait()
	t.Cleanup(p.cleanup)
	return p, nil
}

// startWithFiles starts the command with stdout and stderr on files; the
// child keeps its own descriptors, so the parent closes its copies.
func (p *Proc) startWithFiles() error {
	stdout, err := os.Create(p.stdoutPath)
	if err != nil {
		return fmt.Errorf("create stdout file: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.Create(p.stderrPath)
	if err != nil {
		return fmt.Errorf("create stderr file: %w", err)
	}
	defer stderr.Close()
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	if err := startCmd(p.cmd); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

func (p *Proc) wait() {
	p.code, p.waitErr = exitCode(p.cmd.Wait(), p.cmd.ProcessState)
	close(p.done)
}

// Run runs argv in ns like Start, waits for it and returns its output and
// exit code (128+signal if a signal killed it). If it outlives
// opts.Timeout, its process group is killed and t fails.
func (tp *Topology) Run(t testing.TB, ns string, opts ProcOpts, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd, err := tp.command(ns, opts, argv)
	if err != nil {
		t.Fatalf("nstest: run %q: %v", argv, err)
	}
	var outb, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &errb
	cmd.WaitDelay = time.Second // a grandchild holding the pipes must not hang Run
	if err := startCmd(cmd); err != nil {
		t.Fatalf("nstest: run %q in %s: exec: %v", argv, ns, err)
	}
	code, err = waitTimeout(cmd, cmp.Or(opts.Timeout, 30*time.Second))
	if err != nil {
		t.Fatalf("nstest: run %q in %s: %v\nstdout:\n%s\nstderr:\n%s", argv, ns, err, tail(outb.Bytes()), tail(errb.Bytes()))
	}
	return outb.String(), errb.String(), code
}

// waitTimeout waits for cmd, killing its process group after timeout.
func waitTimeout(cmd *exec.Cmd, timeout time.Duration) (int, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return exitCode(err, cmd.ProcessState)
	case <-timer.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, fmt.Errorf("still running after %v, killed", timeout)
	}
}

// exitCode turns the result of Cmd.Wait into a shell-style exit code. A
// background child that kept the output pipes open past WaitDelay is not
// an error of the command (teardown kills it).
func exitCode(waitErr error, st *os.ProcessState) (int, error) {
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return -1, fmt.Errorf("wait: %w", waitErr)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return st.ExitCode(), nil
}

// command builds "ip netns exec NS [setpriv ...] argv..." in a new process
// group; root-run children die with the test process (Pdeathsig).
func (tp *Topology) command(ns string, opts ProcOpts, argv []string) (*exec.Cmd, error) {
	if err := tp.checkNS(ns); err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, errors.New("empty argv")
	}
	args := []string{"netns", "exec", ns}
	if opts.User != "" {
		priv, err := setprivArgs(opts.User)
		if err != nil {
			return nil, err
		}
		args = append(args, priv...)
	}
	cmd := exec.Command("ip", append(args, argv...)...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Dir = opts.Dir
	cmd.Stdin = opts.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// setprivArgs drops to user with no capabilities. The uid change clears
// the parent-death signal, so setpriv sets it again.
func setprivArgs(name string) ([]string, error) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		return nil, fmt.Errorf("run as %s: setpriv (util-linux) not installed: %w", name, err)
	}
	uid, gid, err := lookupUser(name)
	if err != nil {
		return nil, fmt.Errorf("run as %s: %w", name, err)
	}
	return []string{"setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--pdeathsig=KILL", "--"}, nil
}

// lookupUser resolves "name", "uid" or "uid:gid" to numeric ids.
func lookupUser(s string) (uid, gid string, err error) {
	if u, g, ok := strings.Cut(s, ":"); ok {
		if !isNumber(u) || !isNumber(g) {
			return "", "", fmt.Errorf("user %q: want uid:gid in numbers", s)
		}
		return u, g, nil
	}
	if isNumber(s) {
		if u, err := user.LookupId(s); err == nil {
			return u.Uid, u.Gid, nil
		}
		return s, s, nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return "", "", fmt.Errorf("look up user: %w", err)
	}
	return u.Uid, u.Gid, nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// Name is the namespace and program (or role), as used in messages.
func (p *Proc) Name() string { return p.name }

// Pid is the process id; "ip netns exec" and setpriv exec the program, so
// it is the program's own pid and process group.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process (not its group).
func (p *Proc) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("nstest: signal %s: %w", p.name, err)
	}
	return nil
}

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits up to timeout for the process to exit and returns its exit
// code (128+signal if a signal killed it). The process keeps running after
// a timeout.
func (p *Proc) Wait(timeout time.Duration) (exitCode int, err error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.code, p.waitErr
	case <-timer.C:
		return -1, fmt.Errorf("nstest: %s (pid %d) still running after %v", p.name, p.Pid(), timeout)
	}
}

// Stdout returns what the process has written to stdout so far.
func (p *Proc) Stdout() string { return readString(p.stdoutPath) }

// Stderr returns what the process has written to stderr so far.
func (p *Proc) Stderr() string { return readString(p.stderrPath) }

func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// cleanup stops the process group and, if the test failed, logs the tails
// of its output.
func (p *Proc) cleanup() {
	if err := p.stop(); err != nil {
		p.t.Errorf("nstest: %v", err)
	}
	if p.t.Failed() {
		p.t.Logf("nstest: %s (pid %d) stdout tail:\n%s", p.name, p.Pid(), tail([]byte(p.Stdout())))
		p.t.Logf("nstest: %s (pid %d) stderr tail:\n%s", p.name, p.Pid(), tail([]byte(p.Stderr())))
	}
}

// stop sends SIGTERM to the group, SIGKILL after stopGrace (also to any
// member left once the leader is gone), and waits for the leader.
func (p *Proc) stop() error {
	pgid := p.Pid()
	_ = syscall.Kill(-pgid, syscall.SIGTERM) // ESRCH: group already gone
	select {
	case <-p.done:
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) not reaped 10 s after SIGKILL", p.name, pgid)
	}
}

// tail returns the last 4 KiB of b.
func tail(b []byte) string {
	const limit = 4 << 10
	if len(b) > limit {
		return "…" + string(b[len(b)-limit:])
	}
	return string(b)
}
