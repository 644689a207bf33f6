package nstunnel

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// relayAddr is the fault relay on the node's loopback, in front of the
// Ingress; the Ingress certificate names 127.0.0.1 too (clusterOpts).
const relayAddr = "127.0.0.1:9443"

// TestReverseSurvivesWebsocketReset: a -R forward whose carrier is reset
// without a FIN (a relay between the tunnel and nginx resets every
// connection with SO_LINGER 0) reconnects and registers its port again,
// and the cluster reaches the node's service through it, within 10 s.
func TestReverseSurvivesWebsocketReset(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{loopbackSAN: true})
	c.Topo.StartRole(t, c.Topo.Node, nobody, "httpecho", nodeHTTP)
	relay := c.startRole(t, c.Topo.Node, "relay", relayAddr, nstest.EdgeNodeIP+":443")
	waitStdout(t, relay, 10*time.Second, "relay listening")
	c.Topo.WaitTCP(t, c.Topo.Node, nodeHTTP, 10*time.Second)

	p := c.startTunnel(t, "wss://"+relayAddr, "-R", exposedTCP+":"+nodeHTTP)
	waitLog(t, p, 15*time.Second, "-R "+exposedTCP+" registered", registered(exposedTCP))
	body := c.retryUntil(t, c.Topo.Svc, 10*time.Second, anyOutput, curl(podURL)...)
	wantClientHost(t, "GET "+podURL+" before the reset", body, "127.0.0.1")

	reset := time.Now()
	if err := relay.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	out := waitStdout(t, relay, 5*time.Second, "relay reset")
	if strings.Contains(out, "relay reset 0 connections") {
		t.Fatalf("the relay had no connection to reset: the tunnel's control websocket does not go through it\nrelay stdout:\n%s", out)
	}
	waitLog(t, p, 5*time.Second, "the lost control connection", msgIs("tunnel: reverse control connection lost; reconnecting"))
	// While the tunnel reconnects the port is the mesh ingress's again,
	// which holds a client for its 10 s dial timeout when no job is
	// connected; so the cluster client waits for the new registration.
	waitLogN(t, p, 10*time.Second, 2, "a second registration of -R "+exposedTCP, registered(exposedTCP))
	body = c.retryUntil(t, c.Topo.Svc, max(10*time.Second-time.Since(reset), time.Second), anyOutput,
		curl(podURL, "--max-time", "3")...)
	wantClientHost(t, "GET "+podURL+" after the reset", body, "127.0.0.1")
	if d := time.Since(reset); d > 10*time.Second {
		t.Errorf("the cluster reached the -R port again %v after the reset, want within 10 s", d)
	}
	t.Logf("the cluster reached the -R port again %v after the reset", time.Since(reset).Round(time.Millisecond))
	select {
	case <-p.Done():
		t.Fatalf("the tunnel exited after the reset\nstderr:\n%s", p.Stderr())
	default:
	}
}
