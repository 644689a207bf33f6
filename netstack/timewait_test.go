package netstack

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestTCPForwardReusedSourcePort: the job's kernel may pick a source port
// again soon after a flow on it ended. When the destination closed first,
// the forwarder's inner endpoint is the one in TIME_WAIT, and gVisor hands
// a new SYN for that 4-tuple only to a listening endpoint, which a
// forwarder is not: the SYN was dropped until TIME_WAIT ended (60 s), so
// the job's connect hung for a minute (found by the namespace soak,
// integration/soak). The second flow from the same port must connect
// within seconds; the first is the positive control.
func TestTCPForwardReusedSourcePort(t *testing.T) {
	p := newPair(t, ForwarderConfig{})
	port := server(t, func(c net.Conn) { _, _ = io.WriteString(c, "bye") }) // the server closes first
	src := netip.AddrPortFrom(clientAddr, 40000)
	for i := range 2 {
		start := time.Now()
		c, err := p.client.DialTCP(testCtx(t, 10*time.Second), src, dst(port))
		if err != nil {
			t.Fatalf("flow %d from %v: %v after %v", i+1, src, err, time.Since(start).Round(time.Millisecond))
		}
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != "bye" {
			t.Fatalf("flow %d: read %q, %v; want \"bye\"", i+1, b, err)
		}
		t.Logf("flow %d from %v connected after %v", i+1, src, time.Since(start).Round(time.Millisecond))
		eventually(t, 5*time.Second, "the flow to end", func() bool { return p.router.Stats().TCPActive == 0 })
	}
}
