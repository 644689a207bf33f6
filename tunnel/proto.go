package tunnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/coder/websocket"
)

// Subprotocol names the tunnel's wire format. Servers refuse upgrades that
// do not offer it.
const Subprotocol = "meshlaunch.tunnel.v1"

// Paths under the sidecar's path prefix. The server matches them as path
// suffixes, so the caller may mount it under any prefix without stripping.
const (
	PathPrefix  = "/v1/tunnel/"
	PathHello   = PathPrefix + "hello"   // GET: 204 if the credential is accepted
	PathTCP     = PathPrefix + "tcp"     // ?dst=HOST:PORT: one TCP stream
	PathUDP     = PathPrefix + "udp"     // ?dst=HOST:PORT: one UDP session
	PathReverse = PathPrefix + "reverse" // ?port=P&proto=tcp|udp: control websocket
	PathAccept  = PathPrefix + "accept"  // ?id=ID[&error=TEXT]: data websocket of a reverse connection
)

// Websocket close codes specific to the tunnel (private range 4000-4999).
const (
	// StatusReset aborts a stream: the other end resets its local side.
	StatusReset websocket.StatusCode = 4000
	// StatusReplaced closes a reverse control websocket whose port was
	// registered again.
	StatusReplaced websocket.StatusCode = 4001
	// StatusIdle ends a UDP session after its idle timeout.
	StatusIdle websocket.StatusCode = 4002
)

const (
	// maxMessage is the largest data message either end sends; it is also
	// the read limit. 64 KiB messages keep the framing overhead negligible.
	maxMessage = 64 << 10
	// maxDatagram bounds a UDP payload (the largest IPv4 UDP payload).
	maxDatagram = 65507
	// addrHeaderLen prefixes datagrams on a reverse UDP control websocket:
	// the pod client's address as 16 bytes (IPv4 mapped into IPv6) and a
	// big-endian port.
	addrHeaderLen = 18
	// pendingTTL is how long a reverse connection waits for its data
	// websocket before it is reset.
	pendingTTL = 10 * time.Second
)

// controlMsg is the JSON text message the server sends on a reverse TCP
// control websocket for each connection accepted on the pod.
type controlMsg struct {
	ID     string `json:"id"`
	Client string `json:"client"`           // the pod client's address, ip:port
	Server string `json:"server,omitempty"` // the pod address it connected to
}

// appendAddrHeader appends the reverse UDP header for a.
func appendAddrHeader(b []byte, a netip.AddrPort) []byte {
	ip := a.Addr().Unmap().As16()
	b = append(b, ip[:]...)
	return binary.BigEndian.AppendUint16(b, a.Port())
}

var errShortHeader = errors.New("tunnel: datagram shorter than its address header")

// splitAddrHeader splits a reverse UDP message into address and payload.
func splitAddrHeader(msg []byte) (netip.AddrPort, []byte, error) {
	if len(msg) < addrHeaderLen {
		return netip.AddrPort{}, nil, errShortHeader
	}
	ip := netip.AddrFrom16([16]byte(msg[:16])).Unmap()
	port := binary.BigEndian.Uint16(msg[16:addrHeaderLen])
	return netip.AddrPortFrom(ip, port), msg[addrHeaderLen:], nil
}

// Port is a pod port a client may expose with -R.
type Port struct {
	Num   uint16
	Proto string // "tcp" or "udp"
}

func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Num, p.Proto) }
