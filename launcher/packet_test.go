package launcher_test

import (
	"encoding/binary"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPacketsThroughTUN: a datagram the job sends appears, as an IP packet
// from the pod IP, on the TUN file the parent holds, and a packet the parent
// writes there reaches the job's socket.
func TestPacketsThroughTUN(t *testing.T) {
	if !asNobody(t, tunOpen) {
		return
	}
	cfg := testConfig()
	j, out := startJob(t, cfg, selfRole(t, &cfg, roleUDPEcho)...)
	tun := pollable(t, j.TUN())
	if err := j.Go(t.Context()); err != nil {
		t.Fatalf("Go: %v", err)
	}
	src, payload := readUDP(t, tun, netip.AddrPortFrom(serviceAddr, servicePort))
	if src != netip.AddrPortFrom(podIP, echoPort) || payload != "ping" {
		t.Fatalf("packet from the job: source %v payload %q, want %v %q", src, payload, netip.AddrPortFrom(podIP, echoPort), "ping")
	}
	reply := udpPacket(netip.AddrPortFrom(serviceAddr, servicePort), src, []byte("pong"))
	if _, err := tun.Write(reply); err != nil {
		t.Fatalf("write to TUN: %v", err)
	}
	code, err := j.Wait()
	if err != nil || code != 0 {
		t.Fatalf("job exit = %d, %v", code, err)
	}
	b, _ := os.ReadFile(out.Name())
	if want := "got pong from 10.96.0.10:5353"; !strings.Contains(string(b), want) {
		t.Errorf("job output %q, want %q", b, want)
	}
}

// pollable duplicates f's descriptor in non-blocking mode so that reads
// honour deadlines.
func pollable(t *testing.T, f *os.File) *os.File {
	t.Helper()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	p := os.NewFile(uintptr(fd), "tun")
	t.Cleanup(func() { p.Close() })
	return p
}

// readUDP reads packets from tun until an IPv4 UDP datagram to dst; it
// returns the datagram's source and payload.
func readUDP(t *testing.T, tun *os.File, dst netip.AddrPort) (netip.AddrPort, string) {
	t.Helper()
	if err := tun.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	for {
		n, err := tun.Read(buf)
		if err != nil {
			t.Fatalf("read from TUN: %v", err)
		}
		src, gotDst, payload, ok := parseUDP(buf[:n])
		if ok && gotDst == dst {
			return src, string(payload)
		}
	}
}

func parseUDP(p []byte) (src, dst netip.AddrPort, payload []byte, ok bool) {
	if len(p) < 28 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_UDP {
		return src, dst, nil, false
	}
	ihl := int(p[0]&0x0f) * 4
	u := p[ihl:]
	src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(p[12:16])), binary.BigEndian.Uint16(u[0:2]))
	dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(p[16:20])), binary.BigEndian.Uint16(u[2:4]))
	return src, dst, u[8:binary.BigEndian.Uint16(u[4:6])], true
}

// udpPacket builds an IPv4 UDP packet (UDP checksum 0: none, allowed in IPv4).
func udpPacket(src, dst netip.AddrPort, payload []byte) []byte {
	p := make([]byte, 28+len(payload))
	p[0], p[8], p[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	binary.BigEndian.PutUint16(p[10:], ipChecksum(p[:20]))
	binary.BigEndian.PutUint16(p[20:], src.Port())
	binary.BigEndian.PutUint16(p[22:], dst.Port())
	binary.BigEndian.PutUint16(p[24:], uint16(8+len(payload)))
	copy(p[28:], payload)
	return p
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
