package netstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// listenBacklog is the accept queue of ListenTCP (Linux's SOMAXCONN).
const listenBacklog = 4096

// DialContext connects to address on the named network inside the stack.
// Networks are "tcp", "tcp4", "tcp6", "udp", "udp4" and "udp6"; address must
// be a numeric host:port (the stack resolves no names). ctx bounds the TCP
// handshake only.
func (s *Stack) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	dst, err := parseDialAddr(network, address)
	if err != nil {
		return nil, fmt.Errorf("netstack: dial %s %s: %w", network, address, err)
	}
	if strings.HasPrefix(network, "tcp") {
		return s.DialTCP(ctx, netip.AddrPort{}, dst)
	}
	return s.DialUDP(netip.AddrPort{}, dst)
}

// parseDialAddr validates network and parses a numeric address of its family.
func parseDialAddr(network, address string) (netip.AddrPort, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return netip.AddrPort{}, fmt.Errorf("unsupported network %q", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		if host, _, serr := net.SplitHostPort(address); serr == nil {
			if _, perr := netip.ParseAddr(host); perr != nil {
				return netip.AddrPort{}, fmt.Errorf("host %q is not an IP address: the stack resolves no names", host)
			}
		}
		return netip.AddrPort{}, err
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	switch {
	case strings.HasSuffix(network, "4") && !ap.Addr().Is4():
		return netip.AddrPort{}, fmt.Errorf("%v is not an IPv4 address", ap.Addr())
	case strings.HasSuffix(network, "6") && !ap.Addr().Is6():
		return netip.AddrPort{}, fmt.Errorf("%v is not an IPv6 address", ap.Addr())
	}
	return ap, nil
}

// checkPair validates a (src, dst) pair for a dial and notes spoofing.
func (s *Stack) checkPair(src, dst netip.AddrPort) (netip.AddrPort, netip.AddrPort, error) {
	if s.ctx.Err() != nil {
		return src, dst, net.ErrClosed
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	if !dst.Addr().IsValid() || dst.Addr().IsUnspecified() {
		return src, dst, errors.New("destination address is unspecified")
	}
	if src.Addr().IsValid() && src.Addr().Is4() != dst.Addr().Is4() {
		return src, dst, fmt.Errorf("source %v and destination %v are of different families", src.Addr(), dst.Addr())
	}
	if src.Addr().IsValid() && !s.owns(src.Addr()) {
		// Replies to a spoofed source are addressed to it.
		s.enablePromiscuous()
	}
	return src, dst, nil
}

// DialTCP opens a TCP connection to dst inside the stack. src may be any
// address, including one the stack does not own (the SYN then carries it as
// its source, and replies to it are accepted); a zero src lets the stack
// choose the address and port, a zero port alone picks an ephemeral port.
// ctx bounds the handshake. A refused connection returns an error matching
// syscall.ECONNREFUSED.
func (s *Stack) DialTCP(ctx context.Context, src, dst netip.AddrPort) (net.Conn, error) {
	c, err := s.dialTCP(ctx, src, dst)
	if err != nil {
		return nil, fmt.Errorf("netstack: dial tcp %v: %w", dst, err)
	}
	return c, nil
}

func (s *Stack) dialTCP(ctx context.Context, src, dst netip.AddrPort) (net.Conn, error) {
	src, dst, err := s.checkPair(src, dst)
	if err != nil {
		return nil, err
	}
	var wq waiter.Queue
	ep, terr := s.ip.NewEndpoint(tcp.ProtocolNumber, protoOf(dst.Addr()), &wq)
	if terr != nil {
		return nil, convertError(terr)
	}
	entry, notify := waiter.NewChannelEntry(waiter.WritableEvents | waiter.EventHUp | waiter.EventErr)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)
	if err := s.connect(ctx, ep, src, dst, notify); err != nil {
		ep.Close()
		return nil, err
	}
	return s.newTCPConn(&wq, ep), nil
}

// connect binds ep to src (if set) and connects it to dst, waiting for the
// handshake on notify.
func (s *Stack) connect(ctx context.Context, ep tcpip.Endpoint, src, dst netip.AddrPort, notify <-chan struct{}) error {
	if src.Addr().IsValid() {
		if terr := ep.Bind(fullAddr(src)); terr != nil {
			return fmt.Errorf("bind %v: %w", src, convertError(terr))
		}
	}
	terr := ep.Connect(fullAddr(dst))
	if _, started := terr.(*tcpip.ErrConnectStarted); started {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return net.ErrClosed
		case <-notify:
		}
		terr = ep.LastError()
	}
	return convertError(terr)
}

// DialUDP opens a connected UDP socket from src to dst inside the stack. src
// follows the rules of DialTCP. It does not block.
func (s *Stack) DialUDP(src, dst netip.AddrPort) (net.Conn, error) {
	c, err := s.dialUDP(src, dst)
	if err != nil {
		return nil, fmt.Errorf("netstack: dial udp %v: %w", dst, err)
	}
	return c, nil
}

func (s *Stack) dialUDP(src, dst netip.AddrPort) (net.Conn, error) {
	src, dst, err := s.checkPair(src, dst)
	if err != nil {
		return nil, err
	}
	var wq waiter.Queue
	ep, terr := s.ip.NewEndpoint(udp.ProtocolNumber, protoOf(dst.Addr()), &wq)
	if terr != nil {
		return nil, convertError(terr)
	}
	if src.Addr().IsValid() || src.Port() != 0 {
		if terr := ep.Bind(fullAddr(src)); terr != nil {
			ep.Close()
			return nil, fmt.Errorf("bind %v: %w", src, convertError(terr))
		}
	}
	if terr := ep.Connect(fullAddr(dst)); terr != nil {
		ep.Close()
		return nil, convertError(terr)
	}
	return gonet.NewUDPConn(&wq, ep), nil
}

// ListenTCP listens on addr inside the stack. An unspecified address
// (0.0.0.0 or ::) listens on every address of its family; a zero Addr on
// every address of both.
func (s *Stack) ListenTCP(addr netip.AddrPort) (net.Listener, error) {
	if s.ctx.Err() != nil {
		return nil, fmt.Errorf("netstack: listen tcp %v: %w", addr, net.ErrClosed)
	}
	var wq waiter.Queue
	ep, terr := s.ip.NewEndpoint(tcp.ProtocolNumber, protoOf(addr.Addr()), &wq)
	if terr != nil {
		return nil, fmt.Errorf("netstack: listen tcp %v: %w", addr, convertError(terr))
	}
	if terr = ep.Bind(fullAddr(addr)); terr == nil {
		terr = ep.Listen(listenBacklog)
	}
	if terr != nil {
		ep.Close()
		return nil, fmt.Errorf("netstack: listen tcp %v: %w", addr, convertError(terr))
	}
	return &tcpListener{s: s, ep: ep, wq: &wq, closed: make(chan struct{})}, nil
}

// ListenUDP opens an unconnected UDP socket bound to addr inside the stack,
// with the address rules of ListenTCP.
func (s *Stack) ListenUDP(addr netip.AddrPort) (net.PacketConn, error) {
	if s.ctx.Err() != nil {
		return nil, fmt.Errorf("netstack: listen udp %v: %w", addr, net.ErrClosed)
	}
	var wq waiter.Queue
	ep, terr := s.ip.NewEndpoint(udp.ProtocolNumber, protoOf(addr.Addr()), &wq)
	if terr != nil {
		return nil, fmt.Errorf("netstack: listen udp %v: %w", addr, convertError(terr))
	}
	if terr := ep.Bind(fullAddr(addr)); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("netstack: listen udp %v: %w", addr, convertError(terr))
	}
	return gonet.NewUDPConn(&wq, ep), nil
}
