package sidecar

import (
	"strings"
	"testing"

	"github.com/meshlaunch/meshlaunch/identity"
)

// fuzzKey is a valid public key in wg(8)'s form.
const fuzzKey = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="

// FuzzParsePeer: ParsePeer never panics, errors say what is wanted, and an
// accepted peer re-parses from its canonical form (KEY or KEY=ADDR).
func FuzzParsePeer(f *testing.F) {
	for _, s := range []string{
		fuzzKey, fuzzKey + "=10.7.0.2", fuzzKey + "=::ffff:10.7.0.2", fuzzKey + "=fd00::2", fuzzKey + "=fe80::1%eth0",
		fuzzKey + "=", fuzzKey + "==10.7.0.2", fuzzKey + "=host", " " + fuzzKey + "=10.7.0.2 ", fuzzKey[:43] + "=10.7.0.2",
		fuzzKey[:43], "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dh=", "xTIBA5rboUvnH4htodjb\n6e697QjLERt1NAB4mZqp8Dg=",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "", "=10.7.0.2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeer(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "peer ") {
				t.Fatalf("ParsePeer(%q) error %q does not name the spec", s, err)
			}
			return
		}
		if p.Addr.IsValid() && p.Addr.Is4In6() {
			t.Fatalf("ParsePeer(%q) address %v is not unmapped", s, p.Addr)
		}
		canon := p.PublicKey.String()
		if len(canon) != 44 {
			t.Fatalf("key %q is not 44 characters", canon)
		}
		if p.Addr.IsValid() {
			canon += "=" + p.Addr.String()
		}
		back, err := ParsePeer(canon)
		if err != nil || back != p {
			t.Fatalf("ParsePeer(%q) = %+v; %q parses as %+v, %v", s, p, canon, back, err)
		}
		if _, err := identity.ParsePublicKey(p.PublicKey.String()); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzParsePort: ParsePort never panics and an accepted port is in 1-65535,
// tcp or udp, and re-parses from its String.
func FuzzParsePort(f *testing.F) {
	for _, s := range []string{
		"8080", "8080/tcp", "53/udp", " 53/udp ", "0", "65535", "65536", "-1", "+80", "80/", "80/sctp", "/udp",
		"80/tcp/udp", "0x50", "080", "", "80 /udp",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePort(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "exposed port ") {
				t.Fatalf("ParsePort(%q) error %q does not name the spec", s, err)
			}
			return
		}
		if p.Num == 0 || p.Proto != "tcp" && p.Proto != "udp" {
			t.Fatalf("ParsePort(%q) = %+v", s, p)
		}
		back, err := ParsePort(p.String())
		if err != nil || back != p {
			t.Fatalf("ParsePort(%q) = %+v; %q parses as %+v, %v", s, p, p.String(), back, err)
		}
	})
}
