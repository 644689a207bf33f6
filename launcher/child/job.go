package child

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// exitNotFound and exitCannotRun follow the shell's conventions for a job
// that cannot be started.
const (
	exitCannotRun = 126
	exitNotFound  = 127
)

// runJob starts the job and acts as PID 1 until it exits; it returns the
// job's exit code.
func runJob(cfg *messages.Config, sigs <-chan os.Signal) int {
	pid, err := startJob(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "meshlaunch: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	code := supervise(pid, sigs)
	// PID 1 exiting kills the namespace anyway; killing first makes the
	// order explicit (daemons die before the parent sees our exit).
	unix.Kill(-1, unix.SIGKILL)
	return code
}

// startJob starts the job with no capabilities and returns its pid.
//
// The child holds CAP_NET_ADMIN and CAP_SYS_ADMIN as ambient capabilities
// (how the parent gave them to a non-root uid); ambient and inheritable
// sets are per thread and inherited through fork, so they are cleared on a
// dedicated locked thread that then forks the job and is discarded.
func startJob(cfg *messages.Config) (int, error) {
	if len(cfg.Argv) == 0 {
		return 0, errors.New("child: empty command")
	}
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread with dropped capabilities exits
		// with this goroutine instead of returning to the scheduler.
		if err := dropThreadCaps(); err != nil {
			done <- result{err: err}
			return
		}
		pid, err := execJob(cfg)
		done <- result{pid, err}
	}()
	r := <-done
	return r.pid, r.err
}

func execJob(cfg *messages.Config) (int, error) {
	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "MESHLAUNCH_POD_IP="+cfg.Addr.String())
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("child: start %q: %w", cfg.Argv[0], err)
	}
	// The job is reaped by supervise (wait4 on any child), never by
	// cmd.Wait; Start with *os.File stdio starts no goroutines.
	return cmd.Process.Pid, nil
}

// dropThreadCaps clears the ambient set and the inheritable, permitted and
// effective sets of the calling thread. A non-root uid then execs with no
// capabilities at all.
func dropThreadCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("child: clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("child: drop capabilities: %w", err)
	}
	return nil
}

// reapInterval bounds how long a lost SIGCHLD can delay noticing the job's
// exit (os/signal drops signals when the channel is full).
const reapInterval = time.Second

// supervise reaps children until the job exits, forwarding signals to it.
func supervise(job int, sigs <-chan os.Signal) int {
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			if s != unix.SIGCHLD {
				unix.Kill(job, s.(unix.Signal))
				continue
			}
		case <-tick.C:
		}
		if code, exited := reap(job); exited {
			return code
		}
	}
}

// reap collects every exited child; it reports the job's exit code once the
// job is among them.
func reap(job int) (code int, jobExited bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return code, jobExited
		}
		if pid == job {
			code, jobExited = exitCode(ws), true
		}
	}
}

// exitCode maps a wait status to a shell-style exit code.
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
