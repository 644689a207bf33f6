package netstack

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// echoRequest is an ICMP echo request taken off the packet path.
type echoRequest struct {
	src, dst netip.Addr
	id, seq  uint16
	data     []byte // owned copy of the payload
}

// parseEcho recognises an unfragmented ICMP or ICMPv6 echo request without
// IPv6 extension headers. The returned data aliases pkt.
func parseEcho(pkt []byte) (echoRequest, bool) {
	switch pkt[0] >> 4 {
	case 4:
		return parseEcho4(pkt)
	case 6:
		return parseEcho6(pkt)
	}
	return echoRequest{}, false
}

func parseEcho4(pkt []byte) (echoRequest, bool) {
	if len(pkt) < header.IPv4MinimumSize {
		return echoRequest{}, false
	}
	ihl := int(pkt[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(pkt[2:4]))
	fragmented := binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 // MF or an offset
	if ihl < header.IPv4MinimumSize || total > len(pkt) || total < ihl+header.ICMPv4MinimumSize ||
		fragmented || pkt[9] != uint8(header.ICMPv4ProtocolNumber) || pkt[ihl] != uint8(header.ICMPv4Echo) {
		return echoRequest{}, false
	}
	m := header.ICMPv4(pkt[ihl:total])
	return echoRequest{
		src:  netip.AddrFrom4([4]byte(pkt[12:16])),
		dst:  netip.AddrFrom4([4]byte(pkt[16:20])),
		id:   m.Ident(),
		seq:  m.Sequence(),
		data: m[header.ICMPv4MinimumSize:],
	}, true
}

func parseEcho6(pkt []byte) (echoRequest, bool) {
	const hl = header.IPv6MinimumSize
	if len(pkt) < hl+header.ICMPv6EchoMinimumSize {
		return echoRequest{}, false
	}
	end := hl + int(binary.BigEndian.Uint16(pkt[4:6]))
	if end > len(pkt) || end < hl+header.ICMPv6EchoMinimumSize ||
		pkt[6] != uint8(header.ICMPv6ProtocolNumber) || pkt[hl] != uint8(header.ICMPv6EchoRequest) {
		return echoRequest{}, false
	}
	m := header.ICMPv6(pkt[hl:end])
	return echoRequest{
		src:  netip.AddrFrom16([16]byte(pkt[8:24])),
		dst:  netip.AddrFrom16([16]byte(pkt[24:40])),
		id:   m.Ident(),
		seq:  m.Sequence(),
		data: m[header.ICMPv6EchoMinimumSize:],
	}, true
}

// interceptEcho takes echo requests to destinations the stack does not own
// off the packet path: they are relayed to unicast destinations if the
// forwarder asks for it and dropped otherwise (a promiscuous gVisor NIC would
// answer IPv6 echo for any address itself). It reports whether pkt was
// consumed.
func (s *Stack) interceptEcho(pkt []byte) bool {
	req, ok := parseEcho(pkt)
	if !ok || s.owns(req.dst) {
		return false
	}
	f := s.fwd.Load()
	if f == nil || !f.cfg.ICMPEcho || !req.dst.IsGlobalUnicast() && !req.dst.IsLoopback() {
		return true
	}
	fl := Flow{Network: "icmp", Src: netip.AddrPortFrom(req.src, 0), Dst: netip.AddrPortFrom(req.dst, 0)}
	t, _ := f.admit(fl, false)
	if t == nil {
		return true
	}
	req.data = append([]byte(nil), req.data...)
	if !s.goOwned(func() { f.relayEcho(t, req) }) {
		t.release()
	}
	return true
}

// relayEcho sends req from an unprivileged ping socket and injects the reply,
// if one arrives within DialTimeout, as an echo reply from req.dst. The relay
// holds its in-flight unit until then.
func (f *forwarder) relayEcho(t *ticket, req echoRequest) {
	defer t.release()
	c, err := listenPing(req.dst)
	if err != nil {
		f.s.stats.deny(reasonICMPUnavailable)
		f.icmpWarn.Do(func() {
			f.s.log.Warn("netstack: cannot open an unprivileged ping socket; ICMP echo is not forwarded (check net.ipv4.ping_group_range)", "err", err)
		})
		return
	}
	defer f.s.track(c)()
	defer c.Close()
	if err := sendEcho(c, req); err != nil {
		f.s.log.Debug("netstack: forward echo", "dst", req.dst, "err", err)
		return
	}
	f.s.stats.echoForward.Add(1)
	c.SetReadDeadline(time.Now().Add(f.cfg.DialTimeout))
	if data, ok := awaitReply(c, req); ok {
		f.s.injectOutbound(buildEchoReply(req, data))
	}
}

// listenPing opens an unprivileged ICMP socket of dst's family.
func listenPing(dst netip.Addr) (*icmp.PacketConn, error) {
	if dst.Is4() {
		return icmp.ListenPacket("udp4", "0.0.0.0")
	}
	return icmp.ListenPacket("udp6", "::")
}

// sendEcho writes req as an echo request; the kernel replaces the
// identifier with the socket's.
func sendEcho(c *icmp.PacketConn, req echoRequest) error {
	var typ icmp.Type = ipv4.ICMPTypeEcho
	if req.dst.Is6() {
		typ = ipv6.ICMPTypeEchoRequest
	}
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: int(req.id), Seq: int(req.seq), Data: req.data}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	_, err = c.WriteTo(b, &net.UDPAddr{IP: req.dst.AsSlice()})
	return err
}

// awaitReply reads until the echo reply to req arrives and returns its data.
func awaitReply(c *icmp.PacketConn, req echoRequest) ([]byte, bool) {
	proto, want := 1, icmp.Type(ipv4.ICMPTypeEchoReply)
	if req.dst.Is6() {
		proto, want = 58, ipv6.ICMPTypeEchoReply
	}
	buf := make([]byte, len(req.data)+header.ICMPv4MinimumSize+512)
	for {
		n, peer, err := c.ReadFrom(buf)
		if err != nil {
			return nil, false
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != want || !samePeer(peer, req.dst) {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.Seq == int(req.seq) {
			return e.Data, true
		}
	}
}

// samePeer reports whether a ping socket's peer address is dst.
func samePeer(peer net.Addr, dst netip.Addr) bool {
	u, ok := peer.(*net.UDPAddr)
	if !ok {
		return false
	}
	a, ok := netip.AddrFromSlice(u.IP)
	return ok && a.Unmap() == dst
}

// buildEchoReply makes the raw IP packet of the reply to req, from req.dst to
// req.src, carrying data.
func buildEchoReply(req echoRequest, data []byte) []byte {
	if req.dst.Is4() {
		return buildEchoReply4(req, data)
	}
	return buildEchoReply6(req, data)
}

func buildEchoReply4(req echoRequest, data []byte) []byte {
	const hl, ml = header.IPv4MinimumSize, header.ICMPv4MinimumSize
	b := make([]byte, hl+ml+len(data))
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(b)),
		TTL:         64,
		Protocol:    uint8(header.ICMPv4ProtocolNumber),
		SrcAddr:     toTCPIPAddr(req.dst),
		DstAddr:     toTCPIPAddr(req.src),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	m := header.ICMPv4(b[hl:])
	m.SetType(header.ICMPv4EchoReply)
	m.SetIdent(req.id)
	m.SetSequence(req.seq)
	copy(m[ml:], data)
	m.SetChecksum(^checksum.Checksum(m, 0))
	return b
}

func buildEchoReply6(req echoRequest, data []byte) []byte {
	const hl, ml = header.IPv6MinimumSize, header.ICMPv6EchoMinimumSize
	b := make([]byte, hl+ml+len(data))
	header.IPv6(b).Encode(&header.IPv6Fields{
		PayloadLength:     uint16(ml + len(data)),
		TransportProtocol: header.ICMPv6ProtocolNumber,
		HopLimit:          64,
		SrcAddr:           toTCPIPAddr(req.dst),
		DstAddr:           toTCPIPAddr(req.src),
	})
	m := header.ICMPv6(b[hl:])
	m.SetType(header.ICMPv6EchoReply)
	m.SetIdent(req.id)
	m.SetSequence(req.seq)
	copy(m[ml:], data)
	m.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
		Header:      m[:ml],
		Src:         toTCPIPAddr(req.dst),
		Dst:         toTCPIPAddr(req.src),
		PayloadCsum: checksum.Checksum(data, 0),
		PayloadLen:  len(data),
	}))
	return b
}
