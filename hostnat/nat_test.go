package hostnat

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/netstack"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// jobBehindNAT returns a job-side netstack whose packets go through a NAT;
// the job's stack stands in for the kernel TUN of the namespace.
func jobBehindNAT(t *testing.T, loopback bool) (*netstack.Stack, *NAT) {
	t.Helper()
	job, err := netstack.New(netstack.Config{Addrs: []netip.Addr{meshtest.JobAddr}, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(Config{TUN: job, AllowLoopback: loopback})
	if err != nil {
		job.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return job, n
}

func TestHostLoopbackOnlyWhenAllowed(t *testing.T) {
	port := meshtest.EchoTCP(t)
	dst := netip.AddrPortFrom(LoopbackAddr, port).String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	job, _ := jobBehindNAT(t, true)
	c, err := job.DialContext(ctx, "tcp", dst)
	if err != nil {
		t.Fatalf("with loopback allowed: %v", err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo %q %v", buf, err)
	}
	c.Close()

	denied, nat := jobBehindNAT(t, false)
	start := time.Now()
	if c, err := denied.DialContext(ctx, "tcp", dst); err == nil {
		c.Close()
		t.Fatal("the host's loopback was reachable without --host-loopback")
	} else if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > 2*time.Second {
		t.Fatalf("refusal %v after %s, want a fast ECONNREFUSED", err, time.Since(start))
	}
	if nat.Stats().Denied["loopback"] != 1 {
		t.Fatalf("denials %v", nat.Stats().Denied)
	}
}

func TestMetadataDenied(t *testing.T) {
	job, nat := jobBehindNAT(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := job.DialContext(ctx, "tcp", "169.254.169.254:80"); err == nil {
		c.Close()
		t.Fatal("metadata reachable through the host NAT")
	}
	if nat.Stats().Denied["metadata"] != 1 {
		t.Fatalf("denials %v", nat.Stats().Denied)
	}
}

func TestUDPThroughHostNAT(t *testing.T) {
	job, _ := jobBehindNAT(t, true)
	port := meshtest.EchoUDP(t)
	c, err := job.DialUDP(netip.AddrPort{}, netip.AddrPortFrom(LoopbackAddr, port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("datagram")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "datagram" {
		t.Fatalf("udp echo %q %v", buf[:n], err)
	}
}
