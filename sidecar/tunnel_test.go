package sidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/tunnel"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// TestTunnelBorrowsExposedPort: an exposed port is served by the mesh
// ingress (to the job) until a tunnel client registers it with -R; then
// the pod port reaches the tunnel client's local service; when that
// client stops, the mesh ingress takes the port back and the job gets the
// connections again.
func TestTunnelBorrowsExposedPort(t *testing.T) {
	port := freePort(t)
	r := startSidecar(t, func(c *Config) { c.Expose = []Port{{Num: port, Proto: "tcp"}} })
	job := startJob(t, r)
	serveTag(t, job, port, "job")
	local := meshtest.EchoTCP(t) // answers "ping" with "ping"

	waitAnswer(t, port, "job", 10*time.Second) // the mesh ingress holds the port

	c := newTunnelClient(t, r)
	f, err := tunnel.ParseRemote(fmt.Sprintf("%d:127.0.0.1:%d", port, local))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nil, []tunnel.Forward{f}, nil) }()
	waitAnswer(t, port, "ping", 10*time.Second) // the tunnel holds it

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tunnel client Run = %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tunnel client did not stop within 10 s of its context ending")
	}
	waitAnswer(t, port, "job", 10*time.Second) // and the mesh ingress has it back
}

// newTunnelClient is a tunnel-mode client of r with the shared secret's
// credential.
func newTunnelClient(t *testing.T, r *running) *tunnel.Client {
	t.Helper()
	u, err := wsproxy.ParseServerURL(strings.Replace(r.base, "http://", "ws://", 1))
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.Derive(meshtest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tunnel.NewClient(tunnel.ClientConfig{URL: u, Credential: id.Credential})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveTag listens on the job's port and answers every connection with
// tag once the client has sent all it had; it stops at t's cleanup.
func serveTag(t *testing.T, job *meshtest.Job, port uint16, tag string) {
	t.Helper()
	ln, err := job.Stack.ListenTCP(netip.AddrPortFrom(meshtest.JobAddr, port))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(io.Discard, c)
				_, _ = io.WriteString(c, tag)
			})
		}
	})
}

// waitAnswer connects to the pod port on loopback until a connection
// sent "ping" is answered with want, and fails t after timeout.
func waitAnswer(t *testing.T, port uint16, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got string
	var err error
	for {
		if got, err = ask(port, "ping"); err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("127.0.0.1:%d answered %q (%v) for %v, want %q", port, got, err, timeout, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ask sends msg to 127.0.0.1:port, half-closes and returns the answer.
func ask(port uint16, msg string) (string, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+itoa(port), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}
