package policy

import (
	"errors"
	"net/netip"
	"testing"
)

// flowCase is one row of a Check table: want "" means allowed.
type flowCase struct {
	network string
	dst     string // netip.ParseAddrPort form, e.g. "[::1]:80"
	want    string
}

// runFlows runs each case as a subtest named after the flow.
func runFlows(t *testing.T, p *Policy, cases []flowCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.network+"_"+c.dst, func(t *testing.T) {
			expectReason(t, p, c.network, netip.MustParseAddrPort(c.dst), c.want)
		})
	}
}

// expectReason fails t unless p.Check refuses with want, or allows if want
// is "".
func expectReason(t *testing.T, p *Policy, network string, dst netip.AddrPort, want string) {
	t.Helper()
	err := p.Check(network, dst)
	if got := reasonOf(t, err); got != want {
		t.Errorf("Check(%s, %v) = %v; want reason %q", network, dst, err, want)
	}
}

// reasonOf returns the Denial reason of err, "" for nil, and fails t if err
// is some other error.
func reasonOf(t testing.TB, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var d *Denial
	if !errors.As(err, &d) {
		t.Fatalf("Check returned %T %v; want *Denial", err, err)
	}
	return d.Reason
}

func mustRules(t testing.TB, specs ...string) []Rule {
	t.Helper()
	rules, err := ParseRules(specs)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
