package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ruleForms is appended to errors that do not have a more specific hint.
const ruleForms = "write a CIDR (10.0.0.0/8), an IP (10.0.0.5) or either with ports (10.0.0.0/8:80,443,8000-8999, [fd00::/8]:53)"

// ParseRule parses one rule: a CIDR or bare IP, optionally followed by ':'
// and a comma-separated list of ports and port ranges. An IPv6 prefix with
// ports is bracketed. Examples: "10.96.0.0/12", "10.0.0.5",
// "10.0.0.0/8:80,443,8000-8999", "[fd00::/8]:53", "[::1]:9090", "::/0".
// Surrounding white space is ignored. Host names, zones, prefixes with host
// bits set, port 0 and reversed ranges are errors; the error names s, what is
// wrong and how to write it.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(strings.TrimSpace(s))
	if err != nil {
		return Rule{}, fmt.Errorf("policy: rule %q: %w", s, err)
	}
	return r, nil
}

// ParseRules parses one rule per spec (commas inside a spec separate ports,
// not rules). It reports every bad spec, joined with errors.Join.
func ParseRules(specs []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(specs))
	var errs []error
	for _, s := range specs {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

func parseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, errors.New("empty rule; " + ruleForms)
	}
	addr, ports, hasPorts, err := splitRule(s)
	if err != nil {
		return Rule{}, err
	}
	p, err := parsePrefix(addr)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{Prefix: p}
	if hasPorts {
		if r.Ports, err = parsePorts(ports); err != nil {
			return Rule{}, err
		}
	}
	return r, nil
}

// splitRule splits s into its address part and its port list.
func splitRule(s string) (addr, ports string, hasPorts bool, err error) {
	if s[0] == '[' {
		return splitBracketed(s)
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		addr, ports, _ := strings.Cut(s, ":")
		return addr, ports, true, nil
	}
	// Unbracketed IPv6: ports are not allowed, but say so precisely.
	if _, err := parsePrefix(s); err != nil {
		i := strings.LastIndexByte(s, ':')
		if _, perr := parsePrefix(s[:i]); perr == nil && looksLikePorts(s[i+1:]) {
			return "", "", false, fmt.Errorf("an IPv6 rule with ports must be bracketed: write [%s]:%s", s[:i], s[i+1:])
		}
	}
	return s, "", false, nil
}

// splitBracketed splits "[ipv6]" or "[ipv6]:ports".
func splitBracketed(s string) (addr, ports string, hasPorts bool, err error) {
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return "", "", false, errors.New("missing ']': write [fd00::/8]:53")
	}
	addr, rest := s[1:end], s[end+1:]
	if addr != "" && !strings.Contains(addr, ":") {
		return "", "", false, fmt.Errorf("brackets are only for IPv6: write %s%s", addr, rest)
	}
	if rest == "" {
		return addr, "", false, nil
	}
	if rest[0] != ':' {
		return "", "", false, fmt.Errorf("unexpected %q after ']': write [%s]:PORTS", rest, addr)
	}
	return addr, rest[1:], true, nil
}

// parsePrefix parses "ADDR/BITS" or a bare "ADDR" into a canonical prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	addrPart, bitsPart, hasBits := strings.Cut(s, "/")
	a, err := parseAddr(addrPart)
	if err != nil {
		return netip.Prefix{}, err
	}
	bits := a.BitLen()
	if hasBits {
		if bits, err = parseBits(bitsPart, a); err != nil {
			return netip.Prefix{}, err
		}
	}
	p := netip.PrefixFrom(a, bits)
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%s has host bits set: write %s for the network or %s for the host",
			p, m, netip.PrefixFrom(a, a.BitLen()))
	}
	return canonicalPrefix(p), nil
}

func parseAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, errors.New("missing address; " + ruleForms)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		if looksLikeName(s) {
			return netip.Addr{}, fmt.Errorf("host names are not allowed (destinations are checked after name resolution): write an IP address or CIDR instead of %s", s)
		}
		return netip.Addr{}, fmt.Errorf("%q is not an IP address (%v); %s", s, err, ruleForms)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("zones are not allowed in rules: write %s", a.WithZone(""))
	}
	return a, nil
}

// looksLikeName reports whether s is more likely a host name than a
// mistyped address: it has a letter and no ':'.
func looksLikeName(s string) bool {
	return !strings.Contains(s, ":") && strings.ContainsFunc(s, func(r rune) bool {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	})
}

// looksLikePorts reports whether s is made of the characters of a port
// list.
func looksLikePorts(s string) bool {
	return s != "" && strings.Trim(s, "0123456789,-") == ""
}

func parseBits(s string, a netip.Addr) (int, error) {
	family, maxBits := "IPv4", a.BitLen()
	if a.Is6() {
		family = "IPv6"
	}
	if s == "" {
		return 0, errors.New("missing prefix length after '/': write e.g. 10.0.0.0/8")
	}
	if !isDigits(s) {
		return 0, fmt.Errorf("prefix length %q is not a number: write e.g. /8", s)
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || int(n) > maxBits {
		return 0, fmt.Errorf("prefix length %s is out of range for %s (0-%d)", s, family, maxBits)
	}
	return int(n), nil
}

// parsePorts parses "80,443,8000-8999".
func parsePorts(s string) ([]PortRange, error) {
	if s == "" {
		return nil, errors.New("empty port list after ':': write ports such as :80,443,8000-8999, or leave out the ':' to match every port")
	}
	items := strings.Split(s, ",")
	ranges := make([]PortRange, 0, len(items))
	for _, item := range items {
		pr, err := parsePortRange(item)
		if err != nil {
			return nil, err
		}
		ranges = append(ranges, pr)
	}
	return ranges, nil
}

// parsePortRange parses "80" or "8000-8999".
func parsePortRange(s string) (PortRange, error) {
	if s == "" {
		return PortRange{}, errors.New("empty entry in the port list: separate ports with single commas, e.g. :80,443")
	}
	loS, hiS, isRange := strings.Cut(s, "-")
	lo, err := parsePort(loS)
	if err != nil {
		return PortRange{}, err
	}
	hi := lo
	if isRange {
		if hi, err = parsePort(hiS); err != nil {
			return PortRange{}, err
		}
	}
	if lo > hi {
		return PortRange{}, fmt.Errorf("port range %s is reversed: write %d-%d", s, hi, lo)
	}
	return PortRange{lo, hi}, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" {
		return 0, errors.New("missing port in a range: write LO-HI, e.g. 8000-8999")
	}
	if !isDigits(s) {
		return 0, fmt.Errorf("port %q is not a number: write ports as numbers 1-65535 (names are not allowed)", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %s is out of range: ports are 1-65535", s)
	}
	if n == 0 {
		return 0, errors.New("port 0 is not a valid port: ports are 1-65535 (leave out the ports to match every port)")
	}
	return uint16(n), nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
