package policy

import "net/netip"

// A class is a built-in default-deny address range. The order of classes
// matters: the first one containing an address names it, so "metadata"
// comes before "link_local" and "broadcast" before "reserved".
type class struct {
	reason string
	ranges []netip.Prefix
}

var classes = []class{
	{ReasonMetadata, prefixes("169.254.169.254/32", "fd00:ec2::254/128")},
	{ReasonLoopback, prefixes("127.0.0.0/8", "::1/128")},
	{ReasonUnspecified, prefixes("0.0.0.0/8", "::/128")},
	{ReasonLinkLocal, prefixes("169.254.0.0/16", "fe80::/10")},
	{ReasonMulticast, prefixes("224.0.0.0/4", "ff00::/8")},
	{ReasonBroadcast, prefixes("255.255.255.255/32")},
	{ReasonReserved, prefixes("240.0.0.0/4")},
}

// Prefixes whose addresses carry an IPv4 address in their last 32 bits.
var (
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96")
	compatPrefix = netip.MustParsePrefix("::/96")
)

func prefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

// Normalize returns the address that the built-in classes, Self, Peers and
// Deny rules judge: a without its zone, with an IPv4-mapped address
// (::ffff:a.b.c.d) unmapped, and with an IPv4-compatible (::a.b.c.d, other
// than :: and ::1) or NAT64 well-known-prefix (64:ff9b::a.b.c.d) address
// replaced by the IPv4 address it embeds. It is for classification only:
// the result is not the address to dial. An invalid a is returned as is.
func Normalize(a netip.Addr) netip.Addr {
	a = dialed(a)
	if v4, ok := embeddedIPv4(a); ok {
		return v4
	}
	return a
}

// dialed returns a without its zone and with an IPv4-mapped address
// unmapped: the address the kernel actually connects to.
func dialed(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

// embeddedIPv4 returns the IPv4 address carried by an IPv4-compatible or
// NAT64 well-known-prefix address a, which must already be unmapped and
// unzoned.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	compat := compatPrefix.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback()
	if !compat && !nat64Prefix.Contains(a) {
		return netip.Addr{}, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:])), true
}

// Classify returns the built-in default-deny class of a, judged on
// Normalize(a): one of the Reason constants "metadata", "loopback",
// "unspecified", "link_local", "multicast", "broadcast" or "reserved". An
// invalid a is class "invalid". ok is false if a is in no class. Classify
// knows nothing of Self and Peers, which depend on a Config.
func Classify(a netip.Addr) (class string, ok bool) {
	if !a.IsValid() {
		return ReasonInvalid, true
	}
	c, _, ok := classOf(Normalize(a))
	return c, ok
}

// classOf returns the class of a normalised address and the range of that
// class containing it.
func classOf(a netip.Addr) (reason string, rng netip.Prefix, ok bool) {
	for _, c := range classes {
		for _, r := range c.ranges {
			if r.Contains(a) {
				return c.reason, r, true
			}
		}
	}
	return "", netip.Prefix{}, false
}

// within reports whether inner lies entirely inside outer. Prefixes of
// different families are never within each other (Contains is false).
func within(inner, outer netip.Prefix) bool {
	return inner.Bits() >= outer.Bits() && outer.Contains(inner.Addr())
}
