// Package netstack is meshlaunch's userspace TCP/IP stack. It is the only
// package that imports gVisor; everything it exports speaks net.Conn,
// net.Listener, net.PacketConn and netip.
//
// A [Stack] is three things at once:
//
//   - a wireguard-go tun.Device: Read hands out the raw IP packets the stack
//     sends and Write injects the raw IP packets the tunnel delivers;
//   - a socket layer: [Stack.DialContext], [Stack.DialTCP], [Stack.DialUDP],
//     [Stack.ListenTCP] and [Stack.ListenUDP] open connections inside the
//     stack. DialTCP and DialUDP accept any source address (spoofing), which is
//     how the sidecar's ingress keeps the original client address;
//   - a flow terminator: after [Stack.Forward], TCP, UDP and (optionally) ICMP
//     echo flows addressed to destinations the stack does not own are checked
//     by a [Policy], re-dialled through a [Dialer] outside the stack (the pod's
//     or the host's sockets) and spliced. The sidecar's egress NAT and the
//     launcher's host NAT are this one mechanism with different dialers and
//     policies.
//
// # Contract
//
// A Stack is safe for concurrent use. Read and Write may run concurrently with
// each other and with every other method. New starts no goroutine of its own;
// every goroutine the stack or its forwarders start (splices, UDP sessions,
// echo relays, dials) is owned by the stack, and [Stack.Close] cancels them,
// closes every forwarded flow and waits for all of them before it returns.
// Close is idempotent. After Close, Read and Write return an error matching
// os.ErrClosed (wireguard-go's device stops its TUN reader on it), the Events
// channel is closed, and conns obtained from the stack fail.
//
// Callers own the conns and listeners they obtain from Dial* and Listen*.
// The forwarder owns both sides of a forwarded flow. Traffic to the stack's
// own addresses is not looped back inside the stack: like any other packet it
// leaves through Read (gVisor's HandleLocal cannot be combined with the
// promiscuous NIC that forwarding and spoofed dials need).
//
// # Forwarding
//
// TCP flows are dialled first and the inner handshake completes only when the
// outside dial succeeded: a refused destination is answered with a RST, so the
// inner client sees ECONNREFUSED at once instead of an accepted connection
// that closes. Dials are bounded by [ForwarderConfig.DialTimeout] and by caps
// on dials in flight and on live flows, globally and per source address; a
// flow over a cap is refused at once (TCP: RST, UDP and ICMP: drop) and
// counted in [Stats.Denied]. Both directions of a TCP flow are copied
// independently and half-closed on EOF. UDP flows become sessions per
// 4-tuple, reaped after [ForwarderConfig.UDPIdleTimeout] without traffic in
// either direction. The send and receive buffers of every TCP connection
// the stack hands out or forwards share [Config.BufferBudget]: the more
// connections, the smaller each one's buffers, down to a floor.
//
// The default MTU is [DefaultMTU]: the WireGuard
// carrier is a TCP stream (a websocket), so the inner MTU need not fit a
// physical link, and large segments cut the per-packet cost of every layer.
package netstack
