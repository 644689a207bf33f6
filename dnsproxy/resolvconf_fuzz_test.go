package dnsproxy

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
)

// FuzzParseResolvConf: ParseResolvConf never panics, and what Render makes
// of a parsed file parses back to the same settings with the one nameserver
// Render was given.
func FuzzParseResolvConf(f *testing.F) {
	for _, s := range []string{
		"nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
		"nameserver 8.8.8.8\nnameserver 2001:4860:4860::8888\ndomain example.com\n",
		"nameserver fe80::1%eth0\nsearch a b\nsearch c\noptions ndots:99 edns0 timeout:2 ndots:x\n",
		"# comment\n; comment\nnameserver 1.1.1.1 # trailing\noptions ndots:-1 rotate\n",
		"nameserver not-an-ip\n", "", "search a\n", "nameserver\n", "nameserver ::ffff:10.0.0.1\r\nsearch a\r\n",
		"domain\nnameserver 10.0.0.1\nsearch\n", "nameserver 10.0.0.1\noptions ndots:+3 ndots:007\n",
		"nameserver\t10.0.0.1\vsearch x\n", "nameserver 10.0.0.1\nsearch a\u00a0b\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rc, err := ParseResolvConf(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(rc.Nameservers) == 0 || rc.Ndots < 0 || rc.Ndots > maxNdots {
			t.Fatalf("parsed %q as %+v", b, rc)
		}
		ns := rc.Nameservers[len(rc.Nameservers)-1]
		out := rc.Render(ns)
		back, err := ParseResolvConf(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("Render of %q does not parse: %v\n%s", b, err, out)
		}
		if !slices.Equal(back.Nameservers, []netip.Addr{ns}) || !slices.Equal(back.Search, rc.Search) ||
			back.Ndots != rc.Ndots || !slices.Equal(back.Options, rc.Options) {
			t.Fatalf("%q parsed as %+v; rendered as\n%s\nit parses as %+v", b, rc, out, back)
		}
	})
}
