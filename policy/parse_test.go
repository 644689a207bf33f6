package policy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseRuleValid(t *testing.T) {
	pfx := netip.MustParsePrefix
	cases := []struct {
		in     string
		want   Rule
		string string // canonical String()
	}{
		{"10.96.0.0/12", Rule{Prefix: pfx("10.96.0.0/12")}, "10.96.0.0/12"},
		{"10.0.0.5", Rule{Prefix: pfx("10.0.0.5/32")}, "10.0.0.5/32"},
		{" 10.0.0.5 ", Rule{Prefix: pfx("10.0.0.5/32")}, "10.0.0.5/32"},
		{"0.0.0.0/0", Rule{Prefix: pfx("0.0.0.0/0")}, "0.0.0.0/0"},
		{"10.0.0.0/8:80,443,8000-8999", Rule{pfx("10.0.0.0/8"), []PortRange{{80, 80}, {443, 443}, {8000, 8999}}}, "10.0.0.0/8:80,443,8000-8999"},
		{"10.0.0.5:1-65535", Rule{pfx("10.0.0.5/32"), []PortRange{{1, 65535}}}, "10.0.0.5/32:1-65535"},
		{"10.0.0.5:80-80", Rule{pfx("10.0.0.5/32"), []PortRange{{80, 80}}}, "10.0.0.5/32:80"},
		{"[fd00::/8]:53", Rule{pfx("fd00::/8"), []PortRange{{53, 53}}}, "[fd00::/8]:53"},
		{"[::1]:9090", Rule{pfx("::1/128"), []PortRange{{9090, 9090}}}, "[::1/128]:9090"},
		{"[fd00::/8]", Rule{Prefix: pfx("fd00::/8")}, "fd00::/8"},
		{"::/0", Rule{Prefix: pfx("::/0")}, "::/0"},
		{"fd00::1", Rule{Prefix: pfx("fd00::1/128")}, "fd00::1/128"},
		{"::ffff:10.0.0.5", Rule{Prefix: pfx("10.0.0.5/32")}, "10.0.0.5/32"},
		{"[::ffff:10.0.0.0/104]:80", Rule{pfx("10.0.0.0/8"), []PortRange{{80, 80}}}, "10.0.0.0/8:80"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			r, err := ParseRule(c.in)
			if err != nil {
				t.Fatalf("ParseRule(%q) = %v", c.in, err)
			}
			if !reflect.DeepEqual(r, c.want) {
				t.Errorf("ParseRule(%q) = %+v; want %+v", c.in, r, c.want)
			}
			if s := r.String(); s != c.string {
				t.Errorf("String() = %q; want %q", s, c.string)
			}
			back, err := ParseRule(r.String())
			if err != nil || !reflect.DeepEqual(back, r) {
				t.Errorf("ParseRule(%q) = %+v, %v; want round trip to %+v", r.String(), back, err, r)
			}
		})
	}
}

func TestParseRuleInvalid(t *testing.T) {
	// Each error must name the spec and say what is wrong (all the
	// substrings, case-sensitive).
	cases := []struct {
		in   string
		want []string
	}{
		{"", []string{`rule ""`, "empty rule", "write a CIDR"}},
		{"   ", []string{"empty rule"}},
		{"10.0.0.0/33", []string{`"10.0.0.0/33"`, "prefix length 33 is out of range for IPv4 (0-32)"}},
		{"fd00::/129", []string{"prefix length 129 is out of range for IPv6 (0-128)"}},
		{"10.0.0.0/", []string{"missing prefix length", "10.0.0.0/8"}},
		{"10.0.0.0/x", []string{`prefix length "x" is not a number`}},
		{"10.0.0.0/-1", []string{`prefix length "-1" is not a number`}},
		{"10.0.0.0/99999999999", []string{"out of range for IPv4"}},
		{"10.0.0.0/8:", []string{`"10.0.0.0/8:"`, "empty port list", "leave out the ':'"}},
		{"10.0.0.0/8:0", []string{"port 0 is not a valid port", "1-65535"}},
		{"10.0.0.0/8:70000", []string{"port 70000 is out of range", "1-65535"}},
		{"10.0.0.0/8:90-80", []string{"port range 90-80 is reversed", "write 80-90"}},
		{"10.0.0.0/8:80,,443", []string{"empty entry in the port list"}},
		{"10.0.0.0/8:80,", []string{"empty entry in the port list"}},
		{"10.0.0.0/8:80-", []string{"missing port in a range"}},
		{"10.0.0.0/8:http", []string{`port "http" is not a number`}},
		{"10.0.0.0/8:+80", []string{`port "+80" is not a number`}},
		{"fd00::/8:53", []string{`"fd00::/8:53"`, "must be bracketed", "write [fd00::/8]:53"}},
		{"host.example", []string{`"host.example"`, "host names are not allowed", "IP address or CIDR"}},
		{"host.example:443", []string{"host names are not allowed"}},
		{"localhost", []string{"host names are not allowed"}},
		{"10.0.0.256", []string{`"10.0.0.256" is not an IP address`}},
		{"010.0.0.1", []string{"is not an IP address"}},
		{"10.0.0.1/8", []string{"has host bits set", "write 10.0.0.0/8", "10.0.0.1/32"}},
		{"fe80::1%eth0", []string{"zones are not allowed", "write fe80::1"}},
		{"[fd00::/8", []string{"missing ']'"}},
		{"[10.0.0.0/8]:80", []string{"brackets are only for IPv6", "write 10.0.0.0/8:80"}},
		{"[fd00::/8]53", []string{`unexpected "53" after ']'`}},
		{"[fd00::/8]:", []string{"empty port list"}},
		{"[]", []string{"missing address"}},
		{"/8", []string{"missing address"}},
		{":80", []string{"missing address"}},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			r, err := ParseRule(c.in)
			if err == nil {
				t.Fatalf("ParseRule(%q) = %v; want an error", c.in, r)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "policy: rule ") {
				t.Errorf("error %q does not start with %q", msg, "policy: rule ")
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	rules, err := ParseRules([]string{"10.0.0.0/8:80,443", "[fd00::/8]:53"})
	if err != nil || len(rules) != 2 || len(rules[0].Ports) != 2 {
		t.Fatalf("ParseRules = %v, %v; want 2 rules, the first with 2 port ranges", rules, err)
	}
	rules, err = ParseRules([]string{"10.0.0.0/8", "bad.example", "10.0.0.0/33"})
	if err == nil || rules != nil {
		t.Fatalf("ParseRules = %v, %v; want nil rules and an error", rules, err)
	}
	for _, w := range []string{`"bad.example"`, `"10.0.0.0/33"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
	if rules, err := ParseRules(nil); err != nil || len(rules) != 0 {
		t.Errorf("ParseRules(nil) = %v, %v; want no rules, no error", rules, err)
	}
}

func TestRuleStringZero(t *testing.T) {
	// A zero Rule is not a valid rule: its String must not parse as one.
	if _, err := ParseRule(Rule{}.String()); err == nil {
		t.Errorf("ParseRule(Rule{}.String() = %q) succeeded", Rule{}.String())
	}
}
