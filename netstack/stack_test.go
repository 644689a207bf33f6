package netstack

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.zx2c4.com/wireguard/tun"
)

// TestNewValidation checks the config errors.
func TestNewValidation(t *testing.T) {
	v6 := netip.MustParseAddr("fd00::1")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = no error
	}{
		{"default mtu", Config{Addrs: []netip.Addr{routerAddr, v6}}, ""},
		{"no addresses", Config{}, ""},
		{"mtu too small", Config{MTU: 575}, "netstack: new: mtu 575 out of range 576..65535"},
		{"mtu too large", Config{MTU: 65536}, "netstack: new: mtu 65536 out of range 576..65535"},
		{"v6 needs 1280", Config{MTU: 1279, Addrs: []netip.Addr{v6}}, "netstack: new: mtu 1279 is below the IPv6 minimum 1280 required by address fd00::1"},
		{"v4 at 576", Config{MTU: 576, Addrs: []netip.Addr{routerAddr}}, ""},
		{"zero address", Config{Addrs: []netip.Addr{{}}}, "invalid (zero) address"},
		{"unspecified", Config{Addrs: []netip.Addr{netip.IPv4Unspecified()}}, "unspecified or multicast"},
		{"duplicate", Config{Addrs: []netip.Addr{routerAddr, netip.AddrFrom16(routerAddr.As16())}}, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("New succeeded, want error %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// TestDevice checks the tun.Device surface and the EventUp event.
func TestDevice(t *testing.T) {
	s := newStack(t, routerAddr)
	if name, _ := s.Name(); name != "meshlaunch-netstack" {
		t.Errorf("Name = %q", name)
	}
	if mtu, _ := s.MTU(); mtu != DefaultMTU {
		t.Errorf("MTU = %d, want %d", mtu, DefaultMTU)
	}
	if s.File() != nil || s.BatchSize() < 1 {
		t.Errorf("File = %v, BatchSize = %d", s.File(), s.BatchSize())
	}
	select {
	case ev := <-s.Events():
		if ev != tun.EventUp {
			t.Errorf("event %v, want EventUp", ev)
		}
	default:
		t.Fatal("no EventUp")
	}
	select {
	case ev := <-s.Events():
		t.Errorf("second event %v", ev)
	default:
	}
}

// TestReadBatchAndOffset checks that one Read returns every queued packet at
// once, at the offset, leaving the bytes before it alone.
func TestReadBatchAndOffset(t *testing.T) {
	s := newStack(t, routerAddr)
	const n, off = 5, 16
	var reqs [][]byte
	for i := range n {
		reqs = append(reqs, append(make([]byte, off), echoPacket(t, clientAddr, routerAddr, 1, i, []byte("batch"))...))
	}
	if k, err := s.Write(reqs, off); err != nil || k != n {
		t.Fatalf("Write = %d, %v", k, err)
	}
	bufs, sizes := make([][]byte, s.BatchSize()), make([]int, s.BatchSize())
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{0xAA}, off+2048)
	}
	k, err := s.Read(bufs, sizes, off)
	if err != nil || k != n {
		t.Fatalf("Read = %d, %v; want %d packets in one call", k, err, n)
	}
	for i := range k {
		if !bytes.Equal(bufs[i][:off], bytes.Repeat([]byte{0xAA}, off)) {
			t.Errorf("packet %d: bytes before offset were written", i)
		}
		r, err := parseReply(bufs[i][off : off+sizes[i]])
		if err != nil || r.seq != i {
			t.Errorf("packet %d: %+v, %v", i, r, err)
		}
	}
}

// TestForwardConfigErrors checks Forward's validation.
func TestForwardConfigErrors(t *testing.T) {
	s := newStack(t, routerAddr)
	if err := s.Forward(ForwarderConfig{}); err == nil || !strings.Contains(err.Error(), "Dial is required") {
		t.Errorf("Forward without Dial: %v", err)
	}
	if err := s.Forward(ForwarderConfig{Dial: NetDialer(nil), MaxFlows: -1}); err == nil {
		t.Error("Forward with a negative limit succeeded")
	}
	if err := s.Forward(ForwarderConfig{Dial: NetDialer(nil)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Forward(ForwarderConfig{Dial: NetDialer(nil)}); err == nil || !strings.Contains(err.Error(), "already installed") {
		t.Errorf("second Forward: %v", err)
	}
}

// TestCloseReleasesEverything closes stacks with live forwarded flows, a
// listener, a blocked Read and a dial in flight, and checks that every
// goroutine ends, that Close is idempotent and that the device reports closed.
func TestCloseReleasesEverything(t *testing.T) {
	tcpPort := server(t, echo)
	udpPort := udpServer(t, udpEcho)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the servers stop at cleanup
	a, err := New(Config{Addrs: []netip.Addr{clientAddr}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Addrs: []netip.Addr{routerAddr}})
	if err != nil {
		t.Fatal(err)
	}
	dial := loopback(NetDialer(nil))
	if err := b.Forward(ForwarderConfig{Dial: func(ctx context.Context, f Flow) (net.Conn, error) {
		if f.Dst.Port() == 9 {
			return blackhole(ctx, f)
		}
		return dial(ctx, f)
	}, UDPIdleTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pumps := make(chan struct{}, 2)
	go func() { pump(a, b); pumps <- struct{}{} }()
	go func() { pump(b, a); pumps <- struct{}{} }()

	ctx := testCtx(t, 30*time.Second)
	tc, err := a.DialContext(ctx, "tcp", dst(tcpPort).String())
	if err != nil {
		t.Fatal(err)
	}
	uc, err := a.DialUDP(netip.AddrPort{}, dst(udpPort))
	if err != nil {
		t.Fatal(err)
	}
	if err := udpRoundTrip(uc, "live", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	ln, err := b.ListenTCP(netip.AddrPortFrom(routerAddr, 80))
	if err != nil {
		t.Fatal(err)
	}
	go a.DialContext(ctx, "tcp", dst(9).String()) // held by the blackhole until Close
	eventually(t, 5*time.Second, "flows and the hung dial", func() bool {
		st := b.Stats()
		return st.TCPActive == 1 && st.UDPActive == 1 && st.InFlight == 1
	})

	readErr := make(chan error, 1)
	go func() {
		s := newStack(t, routerAddr) // never fed: Read blocks until Close
		go func() { time.Sleep(50 * time.Millisecond); s.Close() }()
		_, err := s.Read([][]byte{make([]byte, 100)}, []int{0}, 0)
		readErr <- err
	}()

	for _, s := range []*Stack{b, a, b, a} { // twice each: idempotent
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	<-pumps
	<-pumps
	if err := <-readErr; !errors.Is(err, os.ErrClosed) {
		t.Errorf("blocked Read returned %v, want os.ErrClosed", err)
	}
	if _, err := a.Read([][]byte{make([]byte, 100)}, []int{0}, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Read after Close: %v, want os.ErrClosed", err)
	}
	if _, err := a.Write([][]byte{{0x45}}, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close: %v, want os.ErrClosed", err)
	}
	for range a.Events() { // ends only if the channel is closed
	}
	if _, err := tc.Read(make([]byte, 1)); err == nil {
		t.Error("forwarded TCP conn still readable after Close")
	}
	if st := b.Stats(); st.TCPActive != 0 || st.UDPActive != 0 || st.InFlight != 0 {
		t.Errorf("after Close: %+v", st)
	}
	tc.Close()
	uc.Close()
	ln.Close()
}
