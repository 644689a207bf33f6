package nstest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// DialerIn returns a dial function, shaped like net.Dialer.DialContext
// (for wsproxy.ClientConfig.DialContext or an http.Transport), whose
// sockets live in network namespace ns: one of the topology's, or any
// name under /run/netns. Code in the test process, which stays in the
// root namespace, reaches the topology through it; an in-process job peer
// dials the Ingress from the node, for example. DialerIn fails t at once
// if ns does not exist; the function it returns may be called from any
// goroutine and returns errors instead.
//
// addr must be a numeric host:port: a name would be resolved on threads
// of the root namespace. Each dial runs on a new goroutine locked to its
// OS thread, which enters ns with setns(2), dials, goes back, and is
// never unlocked, so Go ends that thread when the goroutine returns
// instead of reusing one that has been elsewhere. A socket keeps the
// namespace it was created in, so the returned conn works from any
// goroutine.
func DialerIn(t testing.TB, ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	path := filepath.Join("/run/netns", ns)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("nstest: DialerIn(%q): %v", ns, err)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if _, err := netip.ParseAddrPort(addr); err != nil {
			return nil, fmt.Errorf("nstest: dial %s %q in %s: want a numeric host:port: %w", network, addr, ns, err)
		}
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: see DialerIn
			c, err := dialInNamespace(ctx, path, network, addr)
			done <- result{c, err}
		}()
		r := <-done // the dial itself honours ctx
		if r.err != nil {
			return nil, fmt.Errorf("nstest: dial %s %s in %s: %w", network, addr, ns, r.err)
		}
		return r.c, nil
	}
}

// dialInNamespace dials from the namespace at path on the calling
// thread, which must be locked, and moves the thread back afterwards.
//
// The way back matters although the thread is never reused: Go never ends
// the process's main thread, it parks it for good when a goroutine exits
// locked to it. Left in the namespace, the main thread would make the
// whole test process a member as /proc/PID/ns/net and "ip netns pids" see
// it, and the topology's teardown would SIGKILL the test.
func dialInNamespace(ctx context.Context, path, network, addr string) (net.Conn, error) {
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
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if herr := unix.Setns(home, unix.CLONE_NEWNET); herr != nil {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("return from %s: %w", path, herr)
	}
	return c, err
}
