package inproc

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/meshtest"
)

// BenchmarkMeshTCPThroughput measures one TCP flow from the job's netstack
// through wireguard-go, the websocket, the sidecar's wireguard-go and
// forwarder to a loopback server that discards. Reported, not asserted.
func BenchmarkMeshTCPThroughput(b *testing.B) {
	sc := meshtest.StartSidecar(b, meshtest.SidecarOptions{})
	job := meshtest.StartJob(b, meshtest.JobOptions{URL: sc.URL})
	job.WaitReady(b, 10*time.Second)
	port := meshtest.HashSinkTCP(b)
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := job.Stack.DialContext(ctx, "tcp", meshtest.TestAddr(port).String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// Announce more than the benchmark will send; the sink just reads.
	if _, err := c.Write([]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(chunk)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = io.Discard
}
