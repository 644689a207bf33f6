// Package meshtest builds the two halves of a mesh in one process for
// tests: a sidecar-shaped peer (wsproxy.Server behind an httptest server,
// wireguard-go on a netstack TUN, forwarders dialing real sockets) and a
// job-shaped peer (wsproxy.Client, wireguard-go on a second netstack) that
// can also join a sidecar running as a separate process.
//
// Everything a builder starts is stopped in tb.Cleanup.
package meshtest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/meshlaunch/meshlaunch/netstack"
)

// Addresses used by the in-process pair. Destinations the job dials in
// TestNet (198.18.0.0/15, the benchmarking range) are re-dialled on
// 127.0.0.1 by [LoopbackDialer], so no traffic leaves the machine.
var (
	JobAddr     = netip.MustParseAddr("10.244.1.5")
	ServiceAddr = netip.MustParseAddr("100.127.255.254")
	TestNet     = netip.MustParsePrefix("198.18.0.0/15")
)

// Secret is the shared secret of the in-process pair.
const Secret = "meshtest-shared-secret-0123456789"

// LoopbackDialer re-dials flows to TestNet on 127.0.0.1, same port, and
// refuses anything else.
func LoopbackDialer() netstack.Dialer {
	var d net.Dialer
	return func(ctx context.Context, f netstack.Flow) (net.Conn, error) {
		if !TestNet.Contains(f.Dst.Addr()) {
			return nil, fmt.Errorf("meshtest: %s is outside %s", f.Dst, TestNet)
		}
		return d.DialContext(ctx, f.Network, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), f.Dst.Port()).String())
	}
}

// TestAddr is the address in TestNet that reaches 127.0.0.1:port.
func TestAddr(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("198.18.0.10"), port)
}

// fast settings keep fault tests short.
var (
	fastPing    = 300 * time.Millisecond
	fastTimeout = 700 * time.Millisecond
)
