package launcher

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// selfExe is the running binary, re-executed as the child.
const selfExe = "/proc/self/exe"

// namespaceAttr is the SysProcAttr of a child in fresh user, network, mount
// and PID namespaces (UTS too if uts) where the caller's uid and gid map to
// themselves. The child gets CAP_NET_ADMIN and CAP_SYS_ADMIN of the new user
// namespace as ambient capabilities: a non-root uid would lose them at
// execve otherwise.
func namespaceAttr(uts bool) *syscall.SysProcAttr {
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWNS | unix.CLONE_NEWPID)
	if uts {
		flags |= unix.CLONE_NEWUTS
	}
	return &syscall.SysProcAttr{
		Cloneflags:                 flags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                []uintptr{unix.CAP_NET_ADMIN, unix.CAP_SYS_ADMIN},
		Pdeathsig:                  unix.SIGKILL,
	}
}

// exitResult is how a child process ended.
type exitResult struct {
	state *os.ProcessState
	err   error
}

// startLocked starts cmd from a goroutine locked to its OS thread and keeps
// that thread (and so the parent-death signal, which Linux ties to the
// thread that forked) alive until the child exits. It returns the start
// error; on success the child's end arrives on exited, after which the
// goroutine is gone.
func startLocked(cmd *exec.Cmd) (exited <-chan exitResult, err error) {
	started := make(chan error, 1)
	done := make(chan exitResult, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		state, err := cmd.Process.Wait()
		done <- exitResult{state, err}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
