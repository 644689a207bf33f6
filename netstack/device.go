package netstack

import (
	"os"

	"golang.zx2c4.com/wireguard/tun"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

var _ tun.Device = (*Stack)(nil)

// deviceName is what Name reports.
const deviceName = "meshlaunch-netstack"

// batchSize is the most packets Read returns and wireguard-go hands to Write
// at once; wireguard-go allocates this many 64 KiB buffers per direction.
const batchSize = 32

// File implements tun.Device; a Stack has no file descriptor.
func (s *Stack) File() *os.File { return nil }

// MTU implements tun.Device.
func (s *Stack) MTU() (int, error) { return s.mtu, nil }

// Name implements tun.Device.
func (s *Stack) Name() (string, error) { return deviceName, nil }

// Events implements tun.Device. It delivers tun.EventUp once and is closed by
// Close.
func (s *Stack) Events() <-chan tun.Event { return s.events }

// BatchSize implements tun.Device.
func (s *Stack) BatchSize() int { return batchSize }

// Read implements tun.Device. It blocks until the stack has at least one
// packet to send (or the stack closes), then copies up to len(bufs) packets
// into bufs[i][offset:], setting sizes[i]. A packet larger than its buffer is
// dropped. After Close it returns an error matching os.ErrClosed. Read may be
// called concurrently with every other method.
func (s *Stack) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	n := 0
	for n == 0 {
		if s.ctx.Err() != nil {
			return 0, os.ErrClosed
		}
		pkt := s.link.ReadContext(s.ctx)
		if pkt == nil {
			continue // closing, or the queue was closed
		}
		n = s.fill(bufs, sizes, offset, pkt)
	}
	return n, nil
}

// fill copies pkt and then every packet already queued, without blocking,
// into bufs; it returns how many it stored.
func (s *Stack) fill(bufs [][]byte, sizes []int, offset int, pkt *stack.PacketBuffer) int {
	n := 0
	for pkt != nil {
		size, ok := copyPacket(bufs[n][offset:], pkt)
		pkt.DecRef()
		if ok {
			sizes[n] = size
			n++
		} else {
			s.log.Debug("netstack: dropped outbound packet larger than the read buffer", "size", size)
		}
		if n == len(bufs) {
			break
		}
		pkt = s.link.Read()
	}
	return n
}

// copyPacket copies the whole packet into dst without allocating. It returns
// the packet size and whether it fitted.
func copyPacket(dst []byte, pkt *stack.PacketBuffer) (int, bool) {
	size := pkt.Size()
	if size > len(dst) {
		return size, false
	}
	views, skip := pkt.AsViewList()
	n := 0
	for v := views.Front(); v != nil && n < size; v = v.Next() {
		b := v.AsSlice()
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		n += copy(dst[n:size], b[skip:])
		skip = 0
	}
	return n, true
}

// Write implements tun.Device: it injects each bufs[i][offset:] as one raw
// IPv4 or IPv6 packet. Empty and non-IP packets are skipped; ICMP echo
// requests to destinations the stack does not own go to the echo forwarder
// (or are dropped without one). It returns len(bufs), or an error matching
// os.ErrClosed after Close. Forwarders run their packet-path hooks (Policy for
// UDP and ICMP) on the caller's goroutine.
func (s *Stack) Write(bufs [][]byte, offset int) (int, error) {
	s.ioMu.RLock()
	defer s.ioMu.RUnlock()
	if s.ctx.Err() != nil {
		return 0, os.ErrClosed
	}
	for _, b := range bufs {
		s.inject(b[offset:])
	}
	return len(bufs), nil
}

// inject hands one raw packet to the stack.
func (s *Stack) inject(pkt []byte) {
	if len(pkt) == 0 {
		return
	}
	var proto tcpip.NetworkProtocolNumber
	switch pkt[0] >> 4 {
	case 4:
		proto = header.IPv4ProtocolNumber
	case 6:
		proto = header.IPv6ProtocolNumber
	default:
		s.log.Debug("netstack: dropped inbound packet that is not IP", "version", pkt[0]>>4)
		return
	}
	if s.interceptEcho(pkt) {
		return
	}
	pb := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(pkt)})
	s.link.InjectInbound(proto, pb)
	pb.DecRef()
}

// injectOutbound queues a raw IP packet for Read as if the stack had sent it.
func (s *Stack) injectOutbound(raw []byte) {
	pb := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(raw)})
	var l stack.PacketBufferList
	l.PushBack(pb)
	if _, err := s.link.WritePackets(l); err != nil {
		s.log.Debug("netstack: dropped injected packet", "err", convertError(err))
	}
	pb.DecRef()
}
