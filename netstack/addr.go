package netstack

import (
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// toTCPIPAddr converts a netip address (IPv4-mapped ones as IPv4).
func toTCPIPAddr(a netip.Addr) tcpip.Address {
	a = a.Unmap()
	if a.Is4() {
		return tcpip.AddrFrom4(a.As4())
	}
	return tcpip.AddrFrom16(a.As16())
}

// fromTCPIPAddr converts a gVisor address; an empty one is the zero Addr.
func fromTCPIPAddr(a tcpip.Address) netip.Addr {
	switch a.Len() {
	case 4:
		return netip.AddrFrom4(a.As4())
	case 16:
		return netip.AddrFrom16(a.As16()).Unmap()
	}
	return netip.Addr{}
}

// fullAddr converts an address and port for endpoints on the stack's NIC; a
// zero or unspecified address becomes the wildcard.
func fullAddr(ap netip.AddrPort) tcpip.FullAddress {
	fa := tcpip.FullAddress{NIC: nicID, Port: ap.Port()}
	if ap.Addr().IsValid() && !ap.Addr().IsUnspecified() {
		fa.Addr = toTCPIPAddr(ap.Addr())
	}
	return fa
}

// protoOf is the network protocol of a.
func protoOf(a netip.Addr) tcpip.NetworkProtocolNumber {
	if a.Unmap().Is4() {
		return header.IPv4ProtocolNumber
	}
	return header.IPv6ProtocolNumber
}

// flowOf describes the flow of a transport endpoint ID as seen inside the
// tunnel: the remote side is the tunnel peer.
func flowOf(network string, id stack.TransportEndpointID) Flow {
	return Flow{
		Network: network,
		Src:     netip.AddrPortFrom(fromTCPIPAddr(id.RemoteAddress), id.RemotePort),
		Dst:     netip.AddrPortFrom(fromTCPIPAddr(id.LocalAddress), id.LocalPort),
	}
}
