package inproc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

func readyPair(t *testing.T) (*meshtest.Sidecar, *meshtest.Job) {
	t.Helper()
	sc := meshtest.StartSidecar(t, meshtest.SidecarOptions{})
	job := meshtest.StartJob(t, meshtest.JobOptions{URL: sc.URL})
	job.WaitReady(t, 10*time.Second)
	return sc, job
}

func dialJob(t *testing.T, job *meshtest.Job, network string, port uint16) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := job.Stack.DialContext(ctx, network, meshtest.TestAddr(port).String())
	if err != nil {
		t.Fatalf("dial %s %s through the mesh: %v", network, meshtest.TestAddr(port), err)
	}
	return c
}

// echoCheck sends size bytes of pattern seed and checks the echo.
func echoCheck(c net.Conn, seed uint64, size int64) error {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, io.LimitReader(meshtest.NewPattern(seed), size))
		if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		errc <- err
	}()
	got := sha256.New()
	n, err := io.Copy(got, c)
	if werr := <-errc; werr != nil {
		return fmt.Errorf("flow %d: write: %w", seed, werr)
	}
	if err != nil {
		return fmt.Errorf("flow %d: read after %d bytes: %w", seed, n, err)
	}
	want := sha256.New()
	_, _ = io.Copy(want, io.LimitReader(meshtest.NewPattern(seed), size))
	if n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		return fmt.Errorf("flow %d: echoed %d bytes, want %d byte-exact", seed, n, size)
	}
	return nil
}

func TestTCPEchoConcurrentFlows(t *testing.T) {
	sc, job := readyPair(t)
	port := meshtest.EchoTCP(t)
	const flows, size = 100, 1 << 20
	var wg sync.WaitGroup
	errs := make(chan error, flows)
	for i := range flows {
		c := dialJob(t, job, "tcp", port)
		wg.Go(func() { errs <- echoCheck(c, uint64(i), size) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if st := sc.Stack.Stats(); st.TCPAccepted != flows {
		t.Errorf("sidecar forwarded %d TCP flows, want %d", st.TCPAccepted, flows)
	}
}

func TestUDPEcho(t *testing.T) {
	_, job := readyPair(t)
	c := dialJob(t, job, "udp", meshtest.EchoUDP(t))
	defer c.Close()
	for i := range 20 {
		msg := fmt.Appendf(nil, "datagram %d", i)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo %q, want %q", buf[:n], msg)
		}
	}
}

func TestRefusedDestinationFailsFast(t *testing.T) {
	_, job := readyPair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = job.Stack.DialContext(ctx, "tcp", meshtest.TestAddr(port).String())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a closed port = %v, want ECONNREFUSED", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("refusal took %s; the sidecar must dial before it accepts", d)
	}
}

func TestTransferSurvivesWebsocketReset(t *testing.T) {
	sc := meshtest.StartSidecar(t, meshtest.SidecarOptions{})
	relay, err := faultrelay.New(sc.HTTP.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	u := *sc.URL
	u.Host = relay.Addr()
	job := meshtest.StartJob(t, meshtest.JobOptions{URL: &u})
	job.WaitReady(t, 10*time.Second)

	const size = 50 << 20
	c := dialJob(t, job, "tcp", meshtest.HashSinkTCP(t))
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute))
	if err := binary.Write(c, binary.BigEndian, uint64(size)); err != nil {
		t.Fatal(err)
	}
	src := io.LimitReader(meshtest.NewPattern(7), size)
	if _, err := io.CopyN(c, src, size/5); err != nil {
		t.Fatal(err)
	}
	relay.Reset() // the carrier dies mid-transfer
	if _, err := io.Copy(c, src); err != nil {
		t.Fatalf("write after the reset: %v", err)
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read digest: %v", err)
	}
	want := sha256.New()
	_, _ = io.Copy(want, io.LimitReader(meshtest.NewPattern(7), size))
	if !bytes.Equal(got, want.Sum(nil)) {
		t.Fatal("the server received different bytes than were sent")
	}
	if n := job.Client.Stats().Connects; n < 2 {
		t.Fatalf("websocket connects = %d; the reset did not happen mid-transfer", n)
	}
	if n := job.Handshakes.Fired(); n < 2 {
		t.Errorf("no handshake forced after the reconnect (%d)", n)
	}
}

func TestWrongCredentialIsRefusedBeforeUpgrade(t *testing.T) {
	sc := meshtest.StartSidecar(t, meshtest.SidecarOptions{})
	job := meshtest.StartJob(t, meshtest.JobOptions{URL: sc.URL, Secret: "another-secret-entirely-0123"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := job.Client.WaitConnected(ctx); !errors.Is(err, wsproxy.ErrUnauthorized) {
		t.Fatalf("WaitConnected = %v, want ErrUnauthorized", err)
	}
	st := sc.Server.Stats()
	if st.AuthFailures == 0 || st.Accepted != 0 {
		t.Fatalf("server stats %+v: want auth failures and no session", st)
	}
}

func TestWrongKeysGetNoHandshake(t *testing.T) {
	sc := meshtest.StartSidecar(t, meshtest.SidecarOptions{})
	other, err := identity.Derive("a-different-secret-for-keys-only")
	if err != nil {
		t.Fatal(err)
	}
	// The right credential (the websocket comes up) with the wrong keys.
	job := meshtest.StartJob(t, meshtest.JobOptions{URL: sc.URL, Keys: &other})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := job.Client.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	port := meshtest.EchoTCP(t)
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer dcancel()
	if c, err := job.Stack.DialContext(dctx, "tcp", meshtest.TestAddr(port).String()); err == nil {
		c.Close()
		t.Fatal("a peer with the wrong keys reached a destination")
	}
	peers, err := sc.Device.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 1 || !peers[0].LastHandshake.IsZero() || peers[0].RxBytes != 0 {
		t.Fatalf("sidecar peer state %+v: want no handshake and no traffic", peers)
	}
	if st := sc.Stack.Stats(); st.TCPAccepted != 0 {
		t.Fatalf("sidecar forwarded %d flows for a peer with the wrong keys", st.TCPAccepted)
	}
}
