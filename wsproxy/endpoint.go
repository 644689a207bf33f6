package wsproxy

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.zx2c4.com/wireguard/conn"
)

// sessionEndpoint is a server-side endpoint: one websocket session.
//
// WireGuard's handshake rate limiter keys on DstIP, so each session gets a
// synthetic address in the discard-only prefix 100::/64 (RFC 6666) derived
// from its id: a handshake flood is then limited per session.
type sessionEndpoint struct {
	id   uint64
	peer string
}

var _ conn.Endpoint = (*sessionEndpoint)(nil)

func (e *sessionEndpoint) ClearSrc()           {}
func (e *sessionEndpoint) SrcToString() string { return "" }
func (e *sessionEndpoint) SrcIP() netip.Addr   { return netip.Addr{} }
func (e *sessionEndpoint) DstToString() string {
	return fmt.Sprintf("ws-session-%d(%s)", e.id, e.peer)
}
func (e *sessionEndpoint) DstToBytes() []byte { return binary.BigEndian.AppendUint64(nil, e.id) }
func (e *sessionEndpoint) DstIP() netip.Addr  { return syntheticAddr(e.id) }

func syntheticAddr(id uint64) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0x01, 0x00
	binary.BigEndian.PutUint64(a[8:], id)
	return netip.AddrFrom16(a)
}

// serverEndpoint is the client's only endpoint: the server URL.
type serverEndpoint struct{ url string }

var _ conn.Endpoint = (*serverEndpoint)(nil)

func (e *serverEndpoint) ClearSrc()           {}
func (e *serverEndpoint) SrcToString() string { return "" }
func (e *serverEndpoint) SrcIP() netip.Addr   { return netip.Addr{} }
func (e *serverEndpoint) DstToString() string { return e.url }
func (e *serverEndpoint) DstToBytes() []byte  { return []byte(e.url) }
func (e *serverEndpoint) DstIP() netip.Addr   { return syntheticAddr(0) }
