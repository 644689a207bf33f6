package policy

import (
	"net/netip"
	"testing"
)

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"10.0.0.1", "10.0.0.1"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"::127.0.0.1", "127.0.0.1"},
		{"::10.0.0.5", "10.0.0.5"},
		{"::0.0.0.2", "0.0.0.2"},
		{"64:ff9b::7f00:1", "127.0.0.1"},
		{"64:ff9b::a9fe:a9fe", "169.254.169.254"},
		{"fe80::1%eth0", "fe80::1"},
		{"::", "::"},
		{"::1", "::1"},
		{"64:ff9b:1::7f00:1", "64:ff9b:1::7f00:1"}, // local-use prefix: not looked through
		{"64:ff9b::1:7f00:1", "64:ff9b::1:7f00:1"}, // outside the /96
		{"::1:0:0", "::1:0:0"},                     // outside ::/96
		{"2001:db8::1", "2001:db8::1"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			if got := Normalize(netip.MustParseAddr(c.in)); got != netip.MustParseAddr(c.want) {
				t.Errorf("Normalize(%s) = %v; want %s", c.in, got, c.want)
			}
		})
	}
	if got := Normalize(netip.Addr{}); got.IsValid() {
		t.Errorf("Normalize(invalid) = %v; want invalid", got)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct{ addr, want string }{
		{"127.0.0.1", ReasonLoopback},
		{"127.255.255.254", ReasonLoopback},
		{"::1", ReasonLoopback},
		{"::ffff:127.0.0.1", ReasonLoopback},
		{"::127.0.0.1", ReasonLoopback},
		{"64:ff9b::7f00:1", ReasonLoopback},
		{"0.0.0.0", ReasonUnspecified},
		{"0.0.0.1", ReasonUnspecified},
		{"0.255.255.255", ReasonUnspecified},
		{"::", ReasonUnspecified},
		{"::0.0.0.2", ReasonUnspecified},
		{"169.254.169.254", ReasonMetadata},
		{"::ffff:169.254.169.254", ReasonMetadata},
		{"64:ff9b::a9fe:a9fe", ReasonMetadata},
		{"fd00:ec2::254", ReasonMetadata},
		{"169.254.169.253", ReasonLinkLocal},
		{"169.254.0.1", ReasonLinkLocal},
		{"fe80::1", ReasonLinkLocal},
		{"fe80::1%eth0", ReasonLinkLocal},
		{"febf::1", ReasonLinkLocal},
		{"224.0.0.1", ReasonMulticast},
		{"239.255.255.255", ReasonMulticast},
		{"ff02::1", ReasonMulticast},
		{"255.255.255.255", ReasonBroadcast},
		{"::ffff:255.255.255.255", ReasonBroadcast},
		{"240.0.0.1", ReasonReserved},
		{"255.255.255.254", ReasonReserved},
		// Positive controls: ordinary addresses have no class.
		{"10.96.0.10", ""},
		{"1.1.1.1", ""},
		{"126.255.255.255", ""},
		{"128.0.0.0", ""},
		{"169.253.255.255", ""},
		{"169.255.0.0", ""},
		{"223.255.255.255", ""},
		{"1.0.0.0", ""},
		{"::2:0:0", ""},
		{"fd00::1", ""},
		{"fd00:ec2::253", ""},
		{"fec0::1", ""},
		{"2001:db8::1", ""},
		{"64:ff9b::a00:5", ""},
		{"::ffff:10.0.0.1", ""},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			got, ok := Classify(netip.MustParseAddr(c.addr))
			if got != c.want || ok != (c.want != "") {
				t.Errorf("Classify(%s) = %q, %v; want %q", c.addr, got, ok, c.want)
			}
		})
	}
	if got, ok := Classify(netip.Addr{}); got != ReasonInvalid || !ok {
		t.Errorf("Classify(invalid) = %q, %v; want %q, true", got, ok, ReasonInvalid)
	}
}
