package tunnel

import (
	"fmt"
	"net/netip"
)

// proxyHeader is a PROXY protocol v1 header for a connection from client
// to server (HAProxy's proxy-protocol.txt, section 2.1). It is "PROXY
// UNKNOWN" when either address is missing or the families differ.
func proxyHeader(client, server string) string {
	src, err1 := netip.ParseAddrPort(client)
	dst, err2 := netip.ParseAddrPort(server)
	if err1 != nil || err2 != nil {
		return "PROXY UNKNOWN\r\n"
	}
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	fam := ""
	switch {
	case s.Is4() && d.Is4():
		fam = "TCP4"
	case s.Is6() && d.Is6():
		fam = "TCP6"
	default:
		return "PROXY UNKNOWN\r\n"
	}
	return fmt.Sprintf("PROXY %s %s %s %d %d\r\n", fam, s.WithZone(""), d.WithZone(""), src.Port(), dst.Port())
}
