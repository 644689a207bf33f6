package nssidecar

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
)

// TestDefaultDenyClasses: with no rules, the sidecar refuses the job's
// flows to the destination classes that would reach the pod's host or
// its cloud (loopback, metadata, link-local, ...) and counts each under
// its reason; with --allow only the allowed port of the Service works.
// Each subtest checks that the Service is reachable in the same setup.
func TestDefaultDenyClasses(t *testing.T) {
	nstest.Require(t)
	c := newCluster(t)
	c.Topo.StartRole(t, c.Topo.Svc, "", "udpecho", nstest.ServiceIP+":9")
	c.Topo.StartRole(t, c.Topo.Svc, "", "tcpecho", nstest.ServiceIP+":81")
	c.Topo.WaitTCP(t, c.Topo.Svc, nstest.ServiceIP+":81", 10*time.Second)

	t.Run("default policy", func(t *testing.T) {
		c.startSidecar(t)
		job := c.startJob(t, nil)
		job.WaitReady(t, 15*time.Second)
		// Positive controls: the same job reaches the Service over TCP
		// and UDP.
		wantPeer(t, mustGet(t, jobHTTP(t, job), serviceURL), nstest.PodIP)
		udpRoundTrip(t, job, nstest.ServiceIP+":9")
		for _, row := range []struct {
			reason, network, addr string
			skip                  string // why the job cannot send this at all
		}{
			{reason: "metadata", network: "tcp", addr: "169.254.169.254:80"},
			{reason: "link_local", network: "tcp", addr: "169.254.1.1:80"},
			{reason: "loopback", network: "tcp", addr: "127.0.0.1:80"},
			{reason: "unspecified", network: "tcp", addr: "0.0.0.1:80"},
			{reason: "reserved", network: "tcp", addr: "240.0.0.1:80"},
			// The job's own address leaves its stack like any other
			// (netstack has no local loopback); the sidecar's port is there.
			{reason: "self", network: "tcp", addr: nstest.PodIP + ":8080"},
			{reason: "metadata", network: "udp", addr: "169.254.169.254:53"},
			{reason: "loopback", network: "udp", addr: "127.0.0.1:53"},
			{reason: "multicast", network: "udp", addr: "224.0.0.1:9"},
			{reason: "broadcast", network: "udp", addr: "255.255.255.255:9",
				skip: "the job's stack sends no broadcast without SO_BROADCAST, which its conns cannot set"},
		} {
			t.Run(row.network+" "+row.reason, func(t *testing.T) {
				if row.skip != "" {
					t.Skip(row.skip)
				}
				before := c.metric(t, deniedSeries(row.reason))
				if row.network == "tcp" {
					wantRefused(t, job, row.addr)
				} else {
					sendUDP(t, job, row.addr)
				}
				c.waitDenied(t, row.reason, before)
			})
		}
	})

	t.Run("allow list", func(t *testing.T) {
		// Control: the pod itself reaches port 81, so a refusal is the
		// sidecar's policy.
		if !c.Topo.CanDialTCP(t, c.Topo.Pod, nobody, nstest.ServiceIP+":81", 5*time.Second) {
			t.Fatalf("control: the pod cannot reach %s:81", nstest.ServiceIP)
		}
		c.startSidecar(t, "--allow", nstest.ServiceIP+"/32:80")
		job := c.startJob(t, nil)
		job.WaitReady(t, 15*time.Second)
		wantPeer(t, mustGet(t, jobHTTP(t, job), serviceURL), nstest.PodIP)
		before := c.metric(t, deniedSeries("not_allowed"))
		wantRefused(t, job, nstest.ServiceIP+":81")
		c.waitDenied(t, "not_allowed", before)
	})
}

// waitDenied waits until the sidecar's count of flows denied for reason
// exceeds before.
func (c *cluster) waitDenied(t *testing.T, reason string, before float64) {
	t.Helper()
	var now float64
	if !waitFor(5*time.Second, func() bool { now = c.metric(t, deniedSeries(reason)); return now > before }) {
		t.Fatalf("%s stayed at %v, want more than %v", deniedSeries(reason), now, before)
	}
}

// wantRefused dials addr over TCP from the job and expects ECONNREFUSED
// at once: the sidecar answers a denied flow with a RST.
func wantRefused(t *testing.T, job *meshtest.Job, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	conn, err := job.Stack.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		t.Fatalf("the job connected to %s", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want ECONNREFUSED", addr, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("dial %s refused after %v, want at once", addr, d)
	}
}

// sendUDP sends one datagram from the job to addr.
func sendUDP(t *testing.T, job *meshtest.Job, addr string) {
	t.Helper()
	conn, err := job.Stack.DialContext(context.Background(), "udp", addr)
	if err != nil {
		t.Fatalf("udp to %s: %v", addr, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("nssidecar")); err != nil {
		t.Fatalf("udp to %s: %v", addr, err)
	}
}

// udpRoundTrip checks that a datagram from the job to the udpecho at
// addr comes back, retrying a lost one.
func udpRoundTrip(t *testing.T, job *meshtest.Job, addr string) {
	t.Helper()
	conn, err := job.Stack.DialContext(context.Background(), "udp", addr)
	if err != nil {
		t.Fatalf("udp to %s: %v", addr, err)
	}
	defer conn.Close()
	msg, buf := []byte("nssidecar udp"), make([]byte, 64)
	for range 5 {
		if _, err := conn.Write(msg); err != nil {
			t.Fatalf("udp to %s: %v", addr, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		n, err := conn.Read(buf)
		if err == nil && bytes.Equal(buf[:n], msg) {
			return
		}
	}
	t.Fatalf("no UDP echo from %s", addr)
}
