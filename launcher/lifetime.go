package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// forwarded are the signals relayed to the job (the child relays the same
// set from the namespace's PID 1 to the job).
var forwarded = []os.Signal{
	unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
}

// Signal sends sig to the job (through the child). A terminating signal
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT) arms a timer that SIGKILLs the
// namespace if the job has not exited after KillGrace. SIGKILL kills the
// namespace at once.
func (j *Job) Signal(sig os.Signal) error {
	if isTerminating(sig) {
		j.armKill()
	}
	if err := j.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("launcher: signal %v: %w", sig, err)
	}
	return nil
}

func isTerminating(sig os.Signal) bool {
	switch sig {
	case unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT:
		return true
	}
	return false
}

// armKill starts the kill-grace timer once.
func (j *Job) armKill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.killer != nil || j.finished {
		return
	}
	j.killer = time.AfterFunc(j.grace, func() {
		j.log.Warn("launcher: job did not exit within the kill grace; killing the namespace", "grace", j.grace)
		j.proc.Kill()
	})
}

// forwardSignals relays this process's forwarded signals until the child
// exits. The goroutine belongs to j and ends before Wait returns.
func (j *Job) forwardSignals() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	j.wg.Go(func() {
		defer signal.Stop(sigs)
		for {
			select {
			case s := <-sigs:
				j.log.Debug("launcher: forwarding signal", "signal", s)
				j.Signal(s)
			case <-j.done:
				return
			}
		}
	})
}

// reap records how the child ended; it runs in j.wg.
func (j *Job) reap() {
	r := <-j.exited
	j.mu.Lock()
	j.finished = true
	if j.killer != nil {
		j.killer.Stop()
	}
	j.code, j.waitErr = exitStatus(r)
	j.mu.Unlock()
	j.conn.Close()
	close(j.done)
}

// exitStatus is the job's exit code as the child reported it: the child
// exits with the job's code (128+N for signal N); a child killed by signal N
// (the kill grace, or a SIGKILL from outside) yields 128+N too.
func exitStatus(r exitResult) (int, error) {
	if r.err != nil {
		return -1, fmt.Errorf("launcher: wait for namespace child: %w", r.err)
	}
	ws, ok := r.state.Sys().(syscall.WaitStatus)
	if !ok {
		return r.state.ExitCode(), nil
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// Wait waits until the child, and so every process of the namespace, has
// exited, and returns the job's exit code (128+N for signal N). err is
// non-nil only if the exit status could not be obtained. Wait may be called
// more than once and concurrently.
func (j *Job) Wait() (exitCode int, err error) {
	<-j.done
	j.wg.Wait()
	if j.stopCtx != nil {
		j.stopCtx()
	}
	return j.code, j.waitErr
}

// Close kills the namespace if it still runs and waits for it. It does not
// close the TUN file (the caller owns it).
func (j *Job) Close() error {
	j.proc.Kill()
	_, err := j.Wait()
	return err
}
