package netstack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// echoPacket builds a raw IPv4 or IPv6 echo request.
func echoPacket(t *testing.T, src, dst netip.Addr, id, seq int, data []byte) []byte {
	t.Helper()
	if src.Is4() {
		m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: data}}
		body, err := m.Marshal(nil)
		if err != nil {
			t.Fatal(err)
		}
		h := make([]byte, ipv4.HeaderLen)
		h[0], h[8], h[9] = 0x45, 64, 1
		binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(body)))
		copy(h[12:16], src.AsSlice())
		copy(h[16:20], dst.AsSlice())
		binary.BigEndian.PutUint16(h[10:], ^onesSum(h))
		return append(h, body...)
	}
	m := icmp.Message{Type: ipv6.ICMPTypeEchoRequest, Body: &icmp.Echo{ID: id, Seq: seq, Data: data}}
	body, err := m.Marshal(icmp.IPv6PseudoHeader(src.AsSlice(), dst.AsSlice()))
	if err != nil {
		t.Fatal(err)
	}
	h := make([]byte, ipv6.HeaderLen)
	h[0], h[6], h[7] = 0x60, 58, 64
	binary.BigEndian.PutUint16(h[4:], uint16(len(body)))
	copy(h[8:24], src.AsSlice())
	copy(h[24:40], dst.AsSlice())
	return append(h, body...)
}

// onesSum is the 16-bit ones' complement sum of b.
func onesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// packets collects what s sends, until s closes (at cleanup).
func packets(t *testing.T, s *Stack) <-chan []byte {
	ch := make(chan []byte, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		bufs, sizes := [][]byte{make([]byte, maxMTU)}, []int{0}
		for {
			if _, err := s.Read(bufs, sizes, 0); err != nil {
				return
			}
			select {
			case ch <- bytes.Clone(bufs[0][:sizes[0]]):
			default:
			}
		}
	}()
	t.Cleanup(func() { s.Close(); <-done })
	return ch
}

// echoReply is a parsed echo reply.
type echoReply struct {
	src, dst netip.Addr
	id, seq  int
	data     []byte
}

// parseReply parses a raw IPv4 or IPv6 packet as an echo reply.
func parseReply(pkt []byte) (echoReply, error) {
	var r echoReply
	var body []byte
	proto := 1
	switch pkt[0] >> 4 {
	case 4:
		h, err := ipv4.ParseHeader(pkt)
		if err != nil {
			return r, err
		}
		r.src, _ = netip.AddrFromSlice(h.Src.To4())
		r.dst, _ = netip.AddrFromSlice(h.Dst.To4())
		body = pkt[h.Len:h.TotalLen]
	case 6:
		h, err := ipv6.ParseHeader(pkt)
		if err != nil {
			return r, err
		}
		r.src, _ = netip.AddrFromSlice(h.Src)
		r.dst, _ = netip.AddrFromSlice(h.Dst)
		body, proto = pkt[ipv6.HeaderLen:ipv6.HeaderLen+h.PayloadLen], 58
	}
	m, err := icmp.ParseMessage(proto, body)
	if err != nil {
		return r, err
	}
	e, ok := m.Body.(*icmp.Echo)
	if !ok || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) {
		return r, fmt.Errorf("not an echo reply: %v", m.Type)
	}
	r.id, r.seq, r.data = e.ID, e.Seq, e.Data
	return r, nil
}

// expectReply waits for the echo reply from dst to src with id, seq, data.
func expectReply(t *testing.T, out <-chan []byte, src, dst netip.Addr, id, seq int, data []byte) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case pkt := <-out:
			r, err := parseReply(pkt)
			if err != nil {
				t.Logf("ignoring packet: %v", err)
				continue
			}
			if r.src != dst || r.dst != src || r.id != id || r.seq != seq || !bytes.Equal(r.data, data) {
				t.Fatalf("reply %v->%v id %d seq %d data %q; want %v->%v id %d seq %d data %q",
					r.src, r.dst, r.id, r.seq, r.data, dst, src, id, seq, data)
			}
			return
		case <-timeout:
			t.Fatal("no echo reply")
		}
	}
}

// expectNothing fails if s sends a packet within d.
func expectNothing(t *testing.T, out <-chan []byte, d time.Duration) {
	t.Helper()
	select {
	case pkt := <-out:
		t.Fatalf("unexpected packet of %d bytes", len(pkt))
	case <-time.After(d):
	}
}

// TestICMPEchoOwned pings the router's own addresses: the stack answers.
func TestICMPEchoOwned(t *testing.T) {
	v6 := netip.MustParseAddr("fd00::1")
	r := newStack(t, routerAddr, v6)
	out := packets(t, r)
	for _, tc := range []struct{ src, dst netip.Addr }{
		{clientAddr, routerAddr},
		{netip.MustParseAddr("fd00::2"), v6},
	} {
		t.Run(tc.dst.String(), func(t *testing.T) {
			data := []byte("owned ping")
			if _, err := r.Write([][]byte{echoPacket(t, tc.src, tc.dst, 7, 1, data)}, 0); err != nil {
				t.Fatal(err)
			}
			expectReply(t, out, tc.src, tc.dst, 7, 1, data)
		})
	}
}

// TestICMPEchoNotForwarded checks that echo to a foreign destination gets no
// answer without ICMPEcho (gVisor would answer IPv6 echo for any address of a
// promiscuous NIC) and that the policy refuses echo by reason.
func TestICMPEchoNotForwarded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      ForwarderConfig
		src, dst netip.Addr
		denied   string
	}{
		{"v4 without ICMPEcho", ForwarderConfig{}, clientAddr, netip.MustParseAddr("198.18.0.20"), ""},
		{"v6 without ICMPEcho", ForwarderConfig{}, netip.MustParseAddr("fd00::2"), netip.MustParseAddr("2001:db8::20"), ""},
		{"v4 denied by policy", ForwarderConfig{ICMPEcho: true, Policy: func(f Flow) error {
			if f.Network == "icmp" && f.Src.Port() == 0 && f.Dst.Port() == 0 {
				return &Denied{Reason: "no_ping"}
			}
			return nil
		}}, clientAddr, netip.MustParseAddr("198.18.0.20"), "no_ping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newStack(t, routerAddr, netip.MustParseAddr("fd00::1"))
			tc.cfg.Dial = loopback(NetDialer(nil))
			if err := r.Forward(tc.cfg); err != nil {
				t.Fatal(err)
			}
			out := packets(t, r)
			if _, err := r.Write([][]byte{echoPacket(t, tc.src, tc.dst, 7, 1, []byte("x"))}, 0); err != nil {
				t.Fatal(err)
			}
			expectNothing(t, out, 300*time.Millisecond)
			st := r.Stats()
			if tc.denied != "" && st.Denied[tc.denied] != 1 {
				t.Errorf("Denied = %v, want %s:1", st.Denied, tc.denied)
			}
			if st.ICMPEchoForwarded != 0 {
				t.Errorf("ICMPEchoForwarded = %d, want 0", st.ICMPEchoForwarded)
			}
		})
	}
}

// TestICMPEchoForward relays echo to 127.0.0.1 (and ::1) through an
// unprivileged ping socket. Where such sockets are not permitted it checks
// that the failure is counted as icmp_unavailable and skips the rest.
func TestICMPEchoForward(t *testing.T) {
	for _, tc := range []struct{ network, src, dst string }{
		{"udp4", "10.99.0.2", "127.0.0.1"},
		{"udp6", "fd00::2", "::1"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			src, dst := netip.MustParseAddr(tc.src), netip.MustParseAddr(tc.dst)
			r := newStack(t, routerAddr, netip.MustParseAddr("fd00::1"))
			if err := r.Forward(ForwarderConfig{Dial: loopback(NetDialer(nil)), ICMPEcho: true}); err != nil {
				t.Fatal(err)
			}
			out := packets(t, r)
			data := []byte("forwarded ping")
			if _, err := r.Write([][]byte{echoPacket(t, src, dst, 4242, 3, data)}, 0); err != nil {
				t.Fatal(err)
			}
			probe, err := icmp.ListenPacket(tc.network, tc.dst)
			if err != nil {
				eventually(t, 5*time.Second, "icmp_unavailable to be counted", func() bool {
					return r.Stats().Denied[reasonICMPUnavailable] == 1
				})
				t.Skipf("unprivileged ping sockets unavailable here (%v; see net.ipv4.ping_group_range): icmp_unavailable counted, reply not checked", err)
			}
			probe.Close()
			expectReply(t, out, src, dst, 4242, 3, data)
			if n := r.Stats().ICMPEchoForwarded; n != 1 {
				t.Errorf("ICMPEchoForwarded = %d, want 1", n)
			}
		})
	}
}
