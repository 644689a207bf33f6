// Package policy decides which destinations meshlaunch may dial on behalf of
// a remote job: the sidecar's egress NAT, the launcher's host NAT and the
// tunnel mode all call [Policy.Check] before dialing and again at dial time,
// after name resolution. It is a security boundary, so every decision is
// made on netip values, never on strings, and fails closed.
//
// # Order of checks
//
// [Policy.Check] refuses a flow with the first reason that applies:
//
//  1. "invalid": an invalid address, an unknown network, or TCP/UDP port 0;
//  2. "self": one of [Config.Self] (the pod IP, the host's own addresses);
//  3. "peer": inside one of [Config.Peers] (peer-to-peer traffic through the
//     sidecar);
//  4. a built-in class (see [Classify]): "metadata", "loopback",
//     "unspecified", "link_local", "multicast", "broadcast", "reserved",
//     unless the class is lifted (below);
//  5. "deny_rule": a [Config.Deny] rule matches;
//  6. "not_allowed": [Config.Allow] is non-empty and no rule matches.
//
// Anything else is allowed. Deny rules therefore beat Allow rules, and "self"
// and "peer" are never lifted by any rule.
//
// # Lifting a built-in class
//
// A class is lifted for a flow only by an Allow rule that matches the flow and
// whose prefix lies entirely inside the class's range. "--allow
// 127.0.0.1/32:9090" lets the job reach another container of the pod on
// localhost:9090 (and nothing else on loopback); "--allow 0.0.0.0/0" and
// "--allow ::/0" lift nothing. The metadata addresses (169.254.169.254,
// fd00:ec2::254) are their own class, so "--allow 169.254.0.0/16" lifts
// link-local but not metadata, and "--allow fd00::/8" does not reach
// fd00:ec2::254.
//
// # Alternative address forms
//
// Zones are ignored and IPv4-mapped addresses (::ffff:a.b.c.d) are the IPv4
// address: this is the address the kernel dials, and the one Allow rules are
// matched against. IPv4-compatible (::a.b.c.d, except :: and ::1) and NAT64
// well-known-prefix (64:ff9b::a.b.c.d) addresses reach an IPv4 address
// through a translator, so everything that refuses — the built-in classes,
// Self, Peers and Deny rules — also looks at the embedded IPv4 address (see
// [Normalize]): 64:ff9b::7f00:1 is "loopback", and "--deny 10.0.0.0/8"
// refuses 64:ff9b::a00:5. Allow rules and lifting look only at the dialed
// address, so a class seen through a translator is never lifted, and
// "--allow 10.0.0.0/8" does not admit 64:ff9b::a00:5. Other translation
// forms (6to4, Teredo, the local-use NAT64 prefix 64:ff9b:1::/48) are not
// looked through; deny them with rules if the network routes them.
//
// IPv4 rules match IPv4 destinations (including mapped forms) and IPv6 rules
// match IPv6 destinations: "::/0" does not cover IPv4.
//
// # Rules
//
// A rule is a prefix and optional port ranges, written as in [ParseRule]:
// "10.96.0.0/12", "10.0.0.5", "10.0.0.0/8:80,443,8000-8999", "[fd00::/8]:53".
// A rule with ports matches only TCP and UDP to those ports, never ICMP; a
// rule without ports matches every port and ICMP.
//
// # Concurrency and cost
//
// A [Policy] is immutable after [New] and safe for concurrent use. Check is
// meant for the per-flow path: it scans the rule lists linearly and does not
// allocate when the flow is allowed.
package policy
