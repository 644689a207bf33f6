package policy

import "net/netip"

// Reasons a flow is refused: Denial.Reason is one of these.
const (
	ReasonLoopback    = "loopback"    // 127.0.0.0/8, ::1
	ReasonUnspecified = "unspecified" // 0.0.0.0/8, ::
	ReasonLinkLocal   = "link_local"  // 169.254.0.0/16, fe80::/10
	ReasonMetadata    = "metadata"    // 169.254.169.254, fd00:ec2::254
	ReasonMulticast   = "multicast"   // 224.0.0.0/4, ff00::/8
	ReasonBroadcast   = "broadcast"   // 255.255.255.255
	ReasonReserved    = "reserved"    // 240.0.0.0/4 other than broadcast
	ReasonSelf        = "self"        // Config.Self
	ReasonPeer        = "peer"        // Config.Peers
	ReasonDenyRule    = "deny_rule"   // a Config.Deny rule matched
	ReasonNotAllowed  = "not_allowed" // Config.Allow is set and no rule matched
	ReasonInvalid     = "invalid"     // bad address, network or port
)

// Denial is the error Check returns for a refused flow. Reason is one of the
// Reason constants, Dst and Network are the flow as passed to Check.
type Denial struct {
	Reason  string
	Dst     netip.AddrPort
	Network string
}

// Error returns e.g. "policy: tcp to 127.0.0.1:80 denied (loopback)"; an
// ICMP destination is shown without its port.
func (d *Denial) Error() string {
	return "policy: " + d.Network + " to " + d.dstString() + " denied (" + d.Reason + ")"
}

func (d *Denial) dstString() string {
	switch {
	case !d.Dst.Addr().IsValid():
		return "invalid address"
	case d.Network == "icmp":
		return d.Dst.Addr().String()
	}
	return d.Dst.String()
}
