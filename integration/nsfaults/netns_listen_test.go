package nsfaults

import (
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// listenIn returns a TCP listener on addr inside network namespace ns,
// for a server run by the test process (nstest.DialerIn's counterpart).
// The socket is made on a goroutine locked to its OS thread that enters
// ns, listens and goes back; the thread is never unlocked, so Go ends it
// rather than reuse a thread that has been elsewhere. The listener keeps
// its namespace and works from any goroutine.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		ln, err := listenOnThread(filepath.Join("/run/netns", ns), addr)
		done <- result{ln, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, r.err)
	}
	return r.ln
}

// listenOnThread listens from the namespace at path on the calling,
// locked thread and moves the thread back to its own namespace, which
// matters for the main thread (see nstest.DialerIn).
func listenOnThread(path, addr string) (net.Listener, error) {
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open own namespace: %w", err)
	}
	defer unix.Close(home)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("setns %s: %w", path, err)
	}
	ln, err := net.Listen("tcp", addr)
	if herr := unix.Setns(home, unix.CLONE_NEWNET); herr != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("return from %s: %w", path, herr)
	}
	return ln, err
}
