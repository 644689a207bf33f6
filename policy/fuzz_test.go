package policy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// The reference below decides by comparing the 16-byte form of an address
// against explicit byte ranges. It shares no code with the package (no
// netip.Prefix, no class table), so a mistake in either shows up as a
// disagreement.

// Forms of a 16-byte address that carry an IPv4 address in the last 4 bytes.
const (
	formIPv6   = iota // no embedded IPv4
	formMapped        // ::ffff:a.b.c.d, and every IPv4 address
	formCompat        // ::a.b.c.d other than :: and ::1
	formNAT64         // 64:ff9b::a.b.c.d
)

// refEmbedded returns the form of b and the IPv4 address it carries.
func refEmbedded(b [16]byte) (form int, v4 [4]byte) {
	var head [12]byte
	copy(head[:], b[:12])
	copy(v4[:], b[12:])
	switch head {
	case [12]byte{10: 0xff, 11: 0xff}:
		return formMapped, v4
	case [12]byte{0x00, 0x64, 0xff, 0x9b}:
		return formNAT64, v4
	case [12]byte{}:
		if v4 == [4]byte{} || v4 == [4]byte{0, 0, 0, 1} {
			return formIPv6, v4 // :: and ::1 are themselves
		}
		return formCompat, v4
	}
	return formIPv6, v4
}

func refClass4(v [4]byte) string {
	switch {
	case v[0] == 127:
		return ReasonLoopback
	case v[0] == 0:
		return ReasonUnspecified
	case v == [4]byte{169, 254, 169, 254}:
		return ReasonMetadata
	case v[0] == 169 && v[1] == 254:
		return ReasonLinkLocal
	case v[0] >= 224 && v[0] <= 239:
		return ReasonMulticast
	case v == [4]byte{255, 255, 255, 255}:
		return ReasonBroadcast
	case v[0] >= 240:
		return ReasonReserved
	}
	return ""
}

func refClass6(b [16]byte) string {
	switch {
	case b == [16]byte{}:
		return ReasonUnspecified
	case b == [16]byte{15: 1}:
		return ReasonLoopback
	case b == [16]byte{0xfd, 0x00, 0x0e, 0xc2, 14: 0x02, 15: 0x54}:
		return ReasonMetadata
	case b[0] == 0xfe && b[1]&0xc0 == 0x80:
		return ReasonLinkLocal
	case b[0] == 0xff:
		return ReasonMulticast
	}
	return ""
}

func refClass(b [16]byte) string {
	if form, v4 := refEmbedded(b); form != formIPv6 {
		return refClass4(v4)
	}
	return refClass6(b)
}

// fuzzConfigB is the configuration refDecisionB mirrors by hand.
func fuzzConfigB(t testing.TB) Config {
	return Config{
		Self:  addrs("10.244.1.5"),
		Peers: []netip.Prefix{netip.MustParsePrefix("10.7.0.0/24")},
		Allow: mustRules(t, "127.0.0.1:9090", "10.0.0.0/8", "[fd00::/8]:53", "0.0.0.0/0:443", "169.254.0.0/16:80", "[::1]:9090"),
		Deny:  mustRules(t, "10.1.0.0/16", "[64:ff9b::/96]:25"),
	}
}

// refDecisionB is the reason fuzzConfigB refuses a flow for, or "".
func refDecisionB(b [16]byte, network string, port uint16) string {
	ports := network != "icmp"
	form, v := refEmbedded(b)
	embedded, isV4 := form != formIPv6, form == formMapped
	switch {
	case ports && port == 0:
		return ReasonInvalid
	case embedded && v == [4]byte{10, 244, 1, 5}:
		return ReasonSelf
	case embedded && v[0] == 10 && v[1] == 7 && v[2] == 0:
		return ReasonPeer
	}
	loopback9090 := ports && port == 9090 && (isV4 && v == [4]byte{127, 0, 0, 1} || b == [16]byte{15: 1})
	linkLocal80 := ports && port == 80 && isV4 && v[0] == 169 && v[1] == 254
	switch c := refClass(b); {
	case c == ReasonLoopback && loopback9090, c == ReasonLinkLocal && linkLocal80:
		// lifted by a narrow allow rule
	case c != "":
		return c
	}
	if embedded && v[0] == 10 && v[1] == 1 || form == formNAT64 && ports && port == 25 {
		return ReasonDenyRule
	}
	allowed := loopback9090 || linkLocal80 ||
		isV4 && v[0] == 10 ||
		!isV4 && b[0] == 0xfd && ports && port == 53 ||
		isV4 && ports && port == 443
	if !allowed {
		return ReasonNotAllowed
	}
	return ""
}

// fuzzAddr builds an address from fuzz bytes: the first 16 bytes if there
// are that many, else the first 4.
func fuzzAddr(raw []byte, zoned bool) (netip.Addr, bool) {
	var a netip.Addr
	switch {
	case len(raw) >= 16:
		a = netip.AddrFrom16([16]byte(raw[:16]))
	case len(raw) >= 4:
		a = netip.AddrFrom4([4]byte(raw[:4]))
	default:
		return a, false
	}
	if zoned && a.Is6() {
		a = a.WithZone("eth0")
	}
	return a, true
}

func FuzzCheckDifferential(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "::ffff:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "0.0.0.0", "0.0.0.1",
		"::", "::1", "::2", "169.254.169.254", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
		"fd00:ec2::254", "fe80::1", "224.0.0.1", "ff02::1", "255.255.255.255", "240.0.0.1",
		"10.244.1.5", "64:ff9b::af4:105", "10.7.0.9", "10.1.2.3", "::10.1.2.3", "64:ff9b::808:808",
		"10.96.0.10", "fd00::1", "2001:db8::1", "169.254.1.1", "64:ff9b:1::7f00:1",
	} {
		a := netip.MustParseAddr(s)
		raw := a.AsSlice()
		for _, port := range []uint16{0, 25, 53, 80, 443, 9090} {
			f.Add(raw, port, uint8(0), false)
		}
		f.Add(raw, uint16(80), uint8(1), true)
		f.Add(raw, uint16(0), uint8(2), false)
		f.Add(raw, uint16(443), uint8(2), false) // ICMP with a port: port rules still never match
	}
	zero, b := New(Config{}), New(fuzzConfigB(f))
	f.Fuzz(func(t *testing.T, raw []byte, port uint16, netSel uint8, zoned bool) {
		a, ok := fuzzAddr(raw, zoned)
		if !ok {
			return
		}
		network := [...]string{"tcp", "udp", "icmp"}[netSel%3]
		b16 := a.As16()
		want := refClass(b16)
		if got, ok := Classify(a); got != want || ok != (want != "") {
			t.Fatalf("Classify(%v) = %q, %v; reference says %q", a, got, ok, want)
		}
		n := Normalize(a)
		if Normalize(n) != n || n.Zone() != "" {
			t.Fatalf("Normalize(%v) = %v is not a fixed point", a, n)
		}
		dst := netip.AddrPortFrom(a, port)
		wantZero := want
		if network != "icmp" && port == 0 {
			wantZero = ReasonInvalid
		}
		if got := reasonOf(t, zero.Check(network, dst)); got != wantZero {
			t.Fatalf("default Check(%s, %v) reason %q; reference says %q", network, dst, got, wantZero)
		}
		if got, want := reasonOf(t, b.Check(network, dst)), refDecisionB(b16, network, port); got != want {
			t.Fatalf("config B Check(%s, %v) reason %q; reference says %q", network, dst, got, want)
		}
	})
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"10.96.0.0/12", "10.0.0.5", "10.0.0.0/8:80,443,8000-8999", "[fd00::/8]:53", "[::1]:9090", "::/0",
		"::ffff:10.0.0.0/104", "[::ffff:10.0.0.5]:1-65535", "", "10.0.0.0/33", "10.0.0.0/8:", "10.0.0.0/8:0",
		"10.0.0.0/8:70000", "10.0.0.0/8:90-80", "fd00::/8:53", "host.example", "fe80::1%eth0", "[", "[]:",
		"10.0.0.1/8", "1.2.3.4:80-", "::1:80:x", "[10.0.0.0/8]:80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "policy: rule ") {
				t.Fatalf("ParseRule(%q) error %q lacks the spec", s, err)
			}
			return
		}
		checkRuleInvariants(t, s, r)
		str := r.String()
		back, err := ParseRule(str)
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("ParseRule(%q) = %+v; its String %q parses as %+v, %v", s, r, str, back, err)
		}
		if back.String() != str {
			t.Fatalf("String not stable: %q then %q", str, back.String())
		}
		New(Config{Allow: []Rule{r}, Deny: []Rule{r}}) // must not panic
	})
}

// checkRuleInvariants fails t unless r is what ParseRule promises.
func checkRuleInvariants(t *testing.T, s string, r Rule) {
	t.Helper()
	p := r.Prefix
	if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() && p.Bits() >= 96 || p.Addr().Zone() != "" {
		t.Fatalf("ParseRule(%q) prefix %v is not canonical", s, p)
	}
	if r.Ports != nil && len(r.Ports) == 0 {
		t.Fatalf("ParseRule(%q) returned an empty non-nil port list", s)
	}
	for _, pp := range r.Ports {
		if pp.Lo == 0 || pp.Lo > pp.Hi {
			t.Fatalf("ParseRule(%q) port range %v is invalid", s, pp)
		}
	}
}
