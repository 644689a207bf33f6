package nsfaults

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const (
	// nginxIdle is the Ingress's proxy timeout in TestLongIdleCarriersOutliveIngressTimeout:
	// nginx closes a proxied connection, websockets included, silent
	// for that long.
	nginxIdle = 60 * time.Second
	// idleFor is how long the carriers stay idle: well past nginxIdle.
	idleFor = 150 * time.Second
	// tunnelPort is the -L port on the node's loopback, to echoAddr.
	tunnelPort = "7007"
)

// TestLongIdleCarriersOutliveIngressTimeout: behind nginx with a 60 s
// idle timeout, a launcher whose job sleeps and a tunnel (-L) holding one
// idle forwarded connection stay silent for 150 s. The pings keep both
// websockets up: the sidecar counts no new mesh session and still has the
// tunnel's websocket, nginx logged no timeout, nobody logged a reconnect,
// and afterwards the job reaches the Service again and the same
// forwarded connection still echoes. Positive controls: with a 5 s idle
// timeout, shorter than the ping interval, nginx does cut the launcher's
// websocket and the checks see it; and resetting the carrier at the end
// shows up in the same checks (a new mesh session, a dead forwarded
// connection).
func TestLongIdleCarriersOutliveIngressTimeout(t *testing.T) {
	long(t)
	t.Parallel()
	t.Run("control", testIngressTimeoutCutsSilentWebsocket)
	c := newCluster(t, clusterOpts{idleTimeout: nginxIdle})
	relay, server := c.startRelay(t) // no faults until the control
	tun := c.startTunnel(t, server, "-L", "127.0.0.1:"+tunnelPort+":"+echoAddr)
	held := c.dialTunnel(t, tun)
	wantEcho(t, held, "before")

	check := fmt.Sprintf("curl -sS --max-time 10 http://%s/ >/dev/null && echo", nstest.ServiceIP)
	job := fmt.Sprintf("%s first-ok; sleep %d; %s second-ok; sleep 120", check, int(idleFor/time.Second), check)
	p := c.startLauncher(t, server, "sh", "-c", job)
	waitStdout(t, p, 30*time.Second, "first-ok")
	m0 := c.metrics(t)
	if live := metric(t, m0, metricTunnelLive); live != 1 {
		t.Fatalf("%s = %v before the idle time, want 1 (the held forwarded connection)", metricTunnelLive, live)
	}

	waitStdout(t, p, idleFor+30*time.Second, "second-ok")
	m1 := c.metrics(t)
	for _, name := range []string{metricSessions, metricTunnelTCP} {
		if a, b := metric(t, m0, name), metric(t, m1, name); a != b {
			t.Errorf("%s went from %v to %v over %v of idle: a websocket was remade", name, a, b, idleFor)
		}
	}
	if live := metric(t, m1, metricTunnelLive); live != 1 {
		t.Errorf("%s = %v after %v of idle, want 1: the held forwarded connection's websocket is gone", metricTunnelLive, live, idleFor)
	}
	wantEcho(t, held, "after")
	for _, pr := range []*nstest.Proc{p, tun} {
		if s := pr.Stderr(); strings.Contains(s, "lost") || strings.Contains(s, "reconnect") {
			t.Errorf("%s logged a lost connection over the idle time:\n%s", pr.Name(), s)
		}
	}
	if log, _ := os.ReadFile(c.Ingress.ErrorLog); strings.Contains(string(log), "timed out") {
		t.Errorf("nginx timed a connection out:\n%s", log)
	}

	// Positive control: a cut carrier is visible to the same checks.
	relay.Reset()
	if err := echo(held, "cut", 10*time.Second); err == nil {
		t.Fatal("control: the forwarded connection still echoes after its carrier was reset")
	}
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, c.metrics(t), metricSessions) == metric(t, m1, metricSessions) {
		if time.Now().After(deadline) {
			t.Fatalf("control: no new mesh session 30 s after the carrier was reset\nlauncher stderr:\n%s", p.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testIngressTimeoutCutsSilentWebsocket: behind nginx with a 5 s idle
// timeout, below the 20 s ping interval, the launcher's websocket is cut
// while the job sleeps: nginx logs the timeout and the sidecar counts a
// new session; the launcher reconnects and the job goes on.
func testIngressTimeoutCutsSilentWebsocket(t *testing.T) {
	c := newCluster(t, clusterOpts{idleTimeout: 5 * time.Second})
	check := fmt.Sprintf("curl -sS --max-time 10 http://%s/ >/dev/null && echo", nstest.ServiceIP)
	p := c.startLauncher(t, c.Ingress.URL, "sh", "-c", check+" first-ok; sleep 12; "+check+" second-ok")
	waitStdout(t, p, 30*time.Second, "first-ok")
	before := metric(t, c.metrics(t), metricSessions)
	waitExit(t, p, 60*time.Second)
	waitStdout(t, p, 0, "second-ok")
	if after := metric(t, c.metrics(t), metricSessions); after <= before {
		t.Errorf("%s stayed %v over 12 s of silence behind a 5 s idle timeout: the check cannot see a cut websocket", metricSessions, before)
	}
	if log, _ := os.ReadFile(c.Ingress.ErrorLog); !strings.Contains(string(log), "timed out") {
		t.Errorf("nginx logged no timeout over 12 s of silence behind a 5 s idle timeout:\n%s", log)
	}
}

// dialTunnel connects to the tunnel's -L port from the node namespace once
// the tunnel listens; the connection is closed at cleanup.
func (c *cluster) dialTunnel(t *testing.T, tun *nstest.Proc) net.Conn {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tun.Stderr(), "tunnel: forwarding") {
		if time.Now().After(deadline) {
			t.Fatalf("the tunnel does not listen within 20 s\nstderr:\n%s", tun.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := nstest.DialerIn(t, c.Topo.Node)(ctx, "tcp", "127.0.0.1:"+tunnelPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// wantEcho fails t unless msg comes back on conn within 10 s.
func wantEcho(t *testing.T, conn net.Conn, msg string) {
	t.Helper()
	if err := echo(conn, msg, 10*time.Second); err != nil {
		t.Fatalf("echo %q through the tunnel: %v", msg, err)
	}
}

// echo writes msg and reads it back within timeout.
func echo(conn net.Conn, msg string, timeout time.Duration) error {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write([]byte(msg)); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got := make([]byte, len(msg))
	for n := 0; n < len(got); {
		m, err := conn.Read(got[n:])
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		n += m
	}
	if string(got) != msg {
		return fmt.Errorf("got %q back", got)
	}
	return nil
}

// waitStdout waits until p's stdout holds want (nstest.Proc.WaitStdout).
func waitStdout(t *testing.T, p *nstest.Proc, timeout time.Duration, want string) {
	t.Helper()
	p.WaitStdout(t, timeout, want)
}
