package policy

import (
	"fmt"
	"net/netip"
)

// Config is what a Policy enforces. The zero Config applies only the
// built-in default denies.
type Config struct {
	// Allow, if non-empty, is the list of destinations that may be reached;
	// anything matching none is "not_allowed". An Allow rule lying inside a
	// built-in class's range also lifts that class for the flows it matches.
	Allow []Rule
	// Deny is always refused ("deny_rule"), even if an Allow rule matches.
	Deny []Rule
	// Self holds the pod IP or the host's own addresses: refused ("self"),
	// never lifted.
	Self []netip.Addr
	// Peers holds the tunnel peers' addresses: refused ("peer"), never
	// lifted.
	Peers []netip.Prefix
}

// Policy decides whether a flow may be dialed. It is immutable and safe for
// concurrent use. A nil *Policy behaves like New(Config{}).
type Policy struct {
	allow, deny []Rule
	self        []netip.Addr
	peers       []netip.Prefix
}

var zeroPolicy Policy

// New returns the Policy for cfg. It copies cfg, so later changes to cfg's
// slices do not affect the Policy. Prefixes are masked, and IPv4-mapped
// prefixes and addresses become IPv4. New panics if a rule or peer has an
// invalid prefix, a port range is not 1 <= Lo <= Hi, or a Self address is
// invalid: these are programming errors, since ParseRule never returns such
// rules.
func New(cfg Config) *Policy {
	p := &Policy{
		allow: canonicalRules("Allow", cfg.Allow),
		deny:  canonicalRules("Deny", cfg.Deny),
		self:  make([]netip.Addr, len(cfg.Self)),
		peers: make([]netip.Prefix, len(cfg.Peers)),
	}
	for i, a := range cfg.Self {
		if !a.IsValid() {
			panic(fmt.Sprintf("policy: New: Self[%d] is not a valid address", i))
		}
		p.self[i] = dialed(a)
	}
	for i, pfx := range cfg.Peers {
		if !pfx.IsValid() {
			panic(fmt.Sprintf("policy: New: Peers[%d] is not a valid prefix", i))
		}
		p.peers[i] = canonicalPrefix(pfx)
	}
	return p
}

func canonicalRules(field string, rules []Rule) []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		if !r.Prefix.IsValid() {
			panic(fmt.Sprintf("policy: New: %s[%d] has an invalid prefix", field, i))
		}
		for _, pp := range r.Ports {
			if pp.Lo == 0 || pp.Lo > pp.Hi {
				panic(fmt.Sprintf("policy: New: %s[%d] has a bad port range %d-%d", field, i, pp.Lo, pp.Hi))
			}
		}
		out[i] = Rule{Prefix: canonicalPrefix(r.Prefix), Ports: append([]PortRange(nil), r.Ports...)}
	}
	return out
}

// flow is a destination as the checks see it.
type flow struct {
	proto proto
	dial  netip.Addr // unzoned, unmapped: what the kernel connects to
	norm  netip.Addr // Normalize(dial): also what a translator reaches
	port  uint16
}

// Check returns nil if a flow of network to dst is allowed, else a *Denial
// saying why. network is "tcp", "udp" or "icmp" ("tcp4", "tcp6", "udp4" and
// "udp6" are accepted as aliases); dst's port is ignored for "icmp" and must
// not be 0 otherwise. The package comment gives the order of the checks.
// Check does not allocate when the flow is allowed.
func (p *Policy) Check(network string, dst netip.AddrPort) error {
	if p == nil {
		p = &zeroPolicy
	}
	reason := ReasonInvalid
	if f, ok := newFlow(network, dst); ok {
		reason = p.refusal(f)
	}
	if reason == "" {
		return nil
	}
	return &Denial{Reason: reason, Dst: dst, Network: network}
}

// newFlow validates a flow and derives both views of its address.
func newFlow(network string, dst netip.AddrPort) (flow, bool) {
	pr, ok := parseNetwork(network)
	if !ok || !dst.Addr().IsValid() || (pr != protoICMP && dst.Port() == 0) {
		return flow{}, false
	}
	a := dialed(dst.Addr())
	return flow{proto: pr, dial: a, norm: Normalize(a), port: dst.Port()}, true
}

func parseNetwork(network string) (proto, bool) {
	switch network {
	case "tcp", "tcp4", "tcp6":
		return protoTCP, true
	case "udp", "udp4", "udp6":
		return protoUDP, true
	case "icmp":
		return protoICMP, true
	}
	return 0, false
}

// refusal returns the reason f is refused, or "" if it is allowed.
func (p *Policy) refusal(f flow) string {
	switch {
	case p.isSelf(f):
		return ReasonSelf
	case p.isPeer(f):
		return ReasonPeer
	}
	if reason, rng, ok := classOf(f.norm); ok && !p.lifts(rng, f) {
		return reason
	}
	if matchAny(p.deny, f, f.dial) || matchAny(p.deny, f, f.norm) {
		return ReasonDenyRule
	}
	if len(p.allow) > 0 && !matchAny(p.allow, f, f.dial) {
		return ReasonNotAllowed
	}
	return ""
}

func (p *Policy) isSelf(f flow) bool {
	for _, a := range p.self {
		if a == f.dial || a == f.norm {
			return true
		}
	}
	return false
}

func (p *Policy) isPeer(f flow) bool {
	for _, pfx := range p.peers {
		if pfx.Contains(f.dial) || pfx.Contains(f.norm) {
			return true
		}
	}
	return false
}

// lifts reports whether an Allow rule lying inside the class range rng
// matches f's dialed address. A class seen only through a translator form
// is never lifted: its dialed address is IPv6 and rng is IPv4.
func (p *Policy) lifts(rng netip.Prefix, f flow) bool {
	for _, r := range p.allow {
		if within(r.Prefix, rng) && r.matches(f.proto, f.dial, f.port) {
			return true
		}
	}
	return false
}

func matchAny(rules []Rule, f flow, a netip.Addr) bool {
	for _, r := range rules {
		if r.matches(f.proto, a, f.port) {
			return true
		}
	}
	return false
}
