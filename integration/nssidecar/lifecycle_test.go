package nssidecar

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
)

// TestRestartWithSameSecret: a sidecar stopped with SIGTERM exits 0; a
// new one with the same secret takes the same in-process job back without
// any help, and new flows work within 10 s of it being ready.
func TestRestartWithSameSecret(t *testing.T) {
	nstest.Require(t)
	c := newCluster(t)
	first := c.startSidecar(t)
	job := c.startJob(t, nil)
	job.WaitReady(t, 15*time.Second)
	web := jobHTTP(t, job)
	wantPeer(t, mustGet(t, web, serviceURL), nstest.PodIP)

	var lastHandshake time.Time
	if peers, err := job.Device.Peers(); err == nil && len(peers) == 1 {
		lastHandshake = peers[0].LastHandshake
	}
	stopSidecar(t, first)
	fired := job.Handshakes.Fired()
	c.startSidecar(t)
	ready := time.Now()
	retry := *web
	retry.Timeout = 2 * time.Second // several tries fit in the 10 s
	var body string
	var err error
	if !waitFor(10*time.Second, func() bool {
		var code int
		code, body, err = fetch(&retry, serviceURL)
		return err == nil && code == http.StatusOK
	}) {
		t.Fatalf("no new flow through the restarted sidecar within 10 s (last: %q, %v); "+
			"the job's last handshake was %v before the new sidecar was ready",
			body, err, ready.Sub(lastHandshake).Round(time.Millisecond))
	}
	wantPeer(t, body, nstest.PodIP)
	if d := time.Since(ready); d > 10*time.Second {
		t.Fatalf("the first new flow took %v after the new sidecar was ready, want 10 s at most", d)
	} else {
		t.Logf("first new flow %v after the new sidecar was ready", d.Round(time.Millisecond))
	}
	if job.Handshakes.Fired() <= fired {
		t.Errorf("the job forced no handshake after reconnecting (fired %d, was %d)", job.Handshakes.Fired(), fired)
	}
}

// stopSidecar sends SIGTERM and expects exit status 0 within the grace
// period and a few seconds more.
func stopSidecar(t *testing.T, p *nstest.Proc) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(grace + 5*time.Second)
	if err != nil || code != 0 {
		t.Fatalf("sidecar after SIGTERM: exit %d, %v; want 0\n%s", code, err, p.Stderr())
	}
}

// TestSIGTERMDrains: on SIGTERM the sidecar turns not ready and refuses
// new flows while an established one keeps working, then exits 0 once
// --shutdown-grace is over; for an egress flow (the job to tcpecho on the
// Service) and an ingress flow (svc to the job's listener on an exposed
// port, held open from the test process).
func TestSIGTERMDrains(t *testing.T) {
	nstest.Require(t)
	c := newCluster(t)
	echoAddr := nstest.ServiceIP + ":7000"
	c.Topo.StartRole(t, c.Topo.Svc, "", "tcpecho", echoAddr)
	c.Topo.WaitTCP(t, c.Topo.Svc, echoAddr, 10*time.Second)
	exposed := netip.AddrPortFrom(netip.MustParseAddr(nstest.PodIP), 9000)

	for _, tc := range []struct {
		name string
		// open returns a connection to an echo server through the sidecar.
		open func(*testing.T, *meshtest.Job) (net.Conn, error)
		// refuseNew checks that a new flow of the same kind is refused.
		refuseNew func(*testing.T, *meshtest.Job)
	}{{
		name: "egress flow",
		open: func(t *testing.T, job *meshtest.Job) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return job.Stack.DialContext(ctx, "tcp", echoAddr)
		},
		refuseNew: func(t *testing.T, job *meshtest.Job) { wantRefused(t, job, nstest.ServiceIP+":80") },
	}, {
		name: "ingress flow",
		open: func(t *testing.T, job *meshtest.Job) (net.Conn, error) {
			serveJobTCPEcho(t, job, exposed)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return nstest.DialerIn(t, c.Topo.Svc)(ctx, "tcp", exposed.String())
		},
		refuseNew: func(t *testing.T, _ *meshtest.Job) {
			if c.Topo.CanDialTCP(t, c.Topo.Svc, nobody, exposed.String(), time.Second) {
				t.Errorf("a new connection to the exposed %v was accepted while draining", exposed)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sc := c.startSidecar(t)
			job := c.startJob(t, nil)
			job.WaitReady(t, 15*time.Second)
			flow, err := tc.open(t, job)
			if err != nil {
				t.Fatal(err)
			}
			defer flow.Close()
			echoLine(t, flow, "before SIGTERM")

			if err := sc.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			term := time.Now()
			c.waitReadyz(t, sc, http.StatusServiceUnavailable, 2*time.Second)
			echoLine(t, flow, "while draining")
			tc.refuseNew(t, job) // the echo above is the control
			if d := time.Since(term); d >= grace {
				t.Fatalf("the checks during the drain took %v, longer than the grace period", d)
			}

			code, err := sc.Wait(grace + 5*time.Second)
			if err != nil || code != 0 {
				t.Fatalf("sidecar after SIGTERM: exit %d, %v; want 0 within %v", code, err, grace+5*time.Second)
			}
			// The flow stayed open, so the sidecar must have waited for it.
			if d := time.Since(term); d < grace-500*time.Millisecond {
				t.Errorf("sidecar exited %v after SIGTERM with a flow open, before the %v grace period", d, grace)
			}
		})
	}
}

// echoLine sends msg on a connection to tcpecho and expects it back
// within 5 s.
func echoLine(t *testing.T, conn net.Conn, msg string) {
	t.Helper()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatalf("echo %q: write: %v", msg, err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo %q: got %q, %v", msg, buf, err)
	}
}
