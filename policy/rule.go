package policy

import (
	"net/netip"
	"strconv"
	"strings"
)

// Rule matches destinations: a prefix and optional port ranges. Write rules
// with ParseRule; a Rule built in code must have a valid Prefix and ranges
// with 1 <= Lo <= Hi, or New panics.
type Rule struct {
	// Prefix is masked. A bare IP parses as /32 or /128, and an IPv4-mapped
	// prefix (::ffff:10.0.0.0/104) as its IPv4 prefix (10.0.0.0/8).
	Prefix netip.Prefix
	// Ports empty means every port and ICMP; non-empty means only TCP and
	// UDP to one of these ranges.
	Ports []PortRange
}

// PortRange is the inclusive range of ports Lo..Hi.
type PortRange struct{ Lo, Hi uint16 }

// proto is the transport of a flow, as far as rules care.
type proto uint8

const (
	protoTCP proto = iota
	protoUDP
	protoICMP
)

// matches reports whether r matches a flow of proto pr to a:port. a must be
// unzoned and unmapped.
func (r Rule) matches(pr proto, a netip.Addr, port uint16) bool {
	if !r.Prefix.Contains(a) {
		return false
	}
	if len(r.Ports) == 0 {
		return true
	}
	if pr == protoICMP {
		return false
	}
	for _, pp := range r.Ports {
		if pp.Lo <= port && port <= pp.Hi {
			return true
		}
	}
	return false
}

// String returns the rule in the form ParseRule reads: "10.0.0.0/8",
// "10.0.0.5/32:80,443,8000-8999", "[fd00::/8]:53". For every rule accepted
// by ParseRule, ParseRule(r.String()) returns r.
func (r Rule) String() string {
	if len(r.Ports) == 0 {
		return r.Prefix.String()
	}
	var b strings.Builder
	if r.Prefix.Addr().Is6() {
		b.WriteString("[" + r.Prefix.String() + "]:")
	} else {
		b.WriteString(r.Prefix.String() + ":")
	}
	for i, pp := range r.Ports {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pp.String())
	}
	return b.String()
}

// String returns "80" for a single port and "8000-8999" for a range.
func (pp PortRange) String() string {
	if pp.Lo == pp.Hi {
		return strconv.Itoa(int(pp.Lo))
	}
	return strconv.Itoa(int(pp.Lo)) + "-" + strconv.Itoa(int(pp.Hi))
}

// canonicalPrefix masks p and turns an IPv4-mapped prefix of at least 96
// bits into the IPv4 prefix it covers, so that it matches unmapped
// destinations. p must be valid.
func canonicalPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}
