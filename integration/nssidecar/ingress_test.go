package nssidecar

import (
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
)

// TestIngressPreservesClientAddress: a cluster client's connections to
// the pod's exposed ports reach the job's listeners with the client's own
// address and port as the source, for TCP and UDP; a port that is not
// exposed is not forwarded.
func TestIngressPreservesClientAddress(t *testing.T) {
	nstest.Require(t)
	c := newCluster(t)
	c.startSidecar(t)
	job := c.startJob(t, nil)
	job.WaitReady(t, 15*time.Second)
	pod := netip.MustParseAddr(nstest.PodIP)
	tcpSeen := serveJobTCPEcho(t, job, netip.AddrPortFrom(pod, 9000))
	udpSeen := serveJobUDPEcho(t, job, netip.AddrPortFrom(pod, 9001))
	serveJobTCPEcho(t, job, netip.AddrPortFrom(pod, 9002)) // listening, but not exposed

	for _, tc := range []struct {
		network string
		port    string
		seen    <-chan netip.AddrPort
	}{{"tcp", "9000", tcpSeen}, {"udp", "9001", udpSeen}} {
		t.Run(tc.network, func(t *testing.T) {
			client := echoCheckFromSvc(t, c, tc.network, net.JoinHostPort(nstest.PodIP, tc.port))
			if client.Addr().String() != nstest.SvcHostIP {
				t.Fatalf("echocheck left from %v, want %s", client, nstest.SvcHostIP)
			}
			select {
			case got := <-tc.seen:
				if got != client {
					t.Fatalf("the job saw the client as %v, want %v", got, client)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the job's listener saw no client")
			}
		})
	}
	t.Run("port not exposed", func(t *testing.T) {
		if c.Topo.CanDialTCP(t, c.Topo.Svc, nobody, nstest.PodIP+":9002", 2*time.Second) {
			t.Fatal("svc reached the job's port 9002, which the sidecar does not expose")
		}
	})
}

// echoCheckFromSvc runs one echo round trip from svc to addr as nobody
// and returns the client's address, which echocheck puts in its message.
func echoCheckFromSvc(t *testing.T, c *cluster, network, addr string) netip.AddrPort {
	t.Helper()
	out, stderr, code := c.Topo.RunRole(t, c.Topo.Svc, nstest.ProcOpts{User: nobody}, "echocheck", network, addr)
	if code != 0 {
		t.Fatalf("echocheck %s %s from svc: exit %d: %s%s", network, addr, code, out, stderr)
	}
	// The message is "nstest echo NETWORK LOCALADDR".
	f := strings.Fields(out)
	if len(f) != 4 {
		t.Fatalf("echocheck printed %q", out)
	}
	ap, err := netip.ParseAddrPort(f[3])
	if err != nil {
		t.Fatalf("echocheck printed %q: %v", out, err)
	}
	return ap
}

// serveJobTCPEcho listens in the job's stack, echoes every connection and
// reports each client's address; it stops at t's cleanup, closing the
// connections still open.
func serveJobTCPEcho(t *testing.T, job *meshtest.Job, addr netip.AddrPort) <-chan netip.AddrPort {
	t.Helper()
	ln, err := job.Stack.ListenTCP(addr)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan netip.AddrPort, 16)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case seen <- addrPortOf(conn.RemoteAddr()):
			default:
			}
			mu.Lock()
			conns[conn] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, conn)
					mu.Unlock()
					conn.Close()
				}()
				_, _ = io.Copy(conn, conn)
			})
		}
	})
	return seen
}

// serveJobUDPEcho is serveJobTCPEcho for UDP: it sends every datagram
// back to its sender and reports the sender.
func serveJobUDPEcho(t *testing.T, job *meshtest.Job, addr netip.AddrPort) <-chan netip.AddrPort {
	t.Helper()
	pc, err := job.Stack.ListenUDP(addr)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan netip.AddrPort, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	wg.Go(func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case seen <- addrPortOf(from):
			default:
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	})
	return seen
}

// addrPortOf is a TCP or UDP address as an unmapped netip.AddrPort, the
// zero value for anything else.
func addrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
