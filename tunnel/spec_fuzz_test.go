package tunnel

import (
	"net/netip"
	"strings"
	"testing"
)

// Fuzz targets for the forward-spec parsers: they never panic, every error
// names the flag and the spec, and an accepted spec renders (String) to a
// spec that parses to the same Forward.

func FuzzParseLocal(f *testing.F) {
	for _, s := range []string{
		"8080:web.default.svc:80", "127.0.0.1:5353:kube-dns.kube-system:53/udp", "[::1]:8080:[fd00::1]:80",
		"localhost:8080:h:80", "0.0.0.0:1:h:65535/tcp", "[fe80::1%eth0]:8080:[fe80::2%eth0]:80",
		"::1:8080:h:80", "8080:h:80/sctp", "8080:h:0", "0:h:80", "8080:h:65536", "8080::80", "8080:[h:80",
		"8080:[h]x:80", "[::ffff:10.0.0.1]:8080:h:80", " 8080:h:80 ", "8080:h/x:80", "8080:a b:80", "8080:[a:b]:80",
		"8080:h:80/", "a:b:c:d:e", "", ":", "[]:1:h:2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fw, err := ParseLocal(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tunnel: -L ") {
				t.Fatalf("ParseLocal(%q) error %q does not name the flag", s, err)
			}
			return
		}
		checkForward(t, s, fw)
		if !fw.Bind.IsValid() || fw.Bind.Port() == 0 || fw.Bind.Addr().Is4In6() || fw.RemotePort != 0 {
			t.Fatalf("ParseLocal(%q) = %+v: bad bind or a pod port", s, fw)
		}
		str := fw.String()
		back, err := ParseLocal(str)
		if err != nil || back != fw {
			t.Fatalf("ParseLocal(%q) = %+v; its String %q parses as %+v, %v", s, fw, str, back, err)
		}
		if back.String() != str {
			t.Fatalf("String not stable: %q then %q", str, back.String())
		}
	})
}

func FuzzParseRemote(f *testing.F) {
	for _, s := range []string{
		"8888:localhost:8888", "53:127.0.0.1:5353/udp", "8080:[::1]:80", "8080:[fe80::1%lo]:80/tcp",
		"127.0.0.1:8080:h:80", "8080:h:0", "0:h:80", "8080:h", "8080:h:80/UDP", "8080:[h:80", "8080:h?:80",
		"8080:[a:b]:80", "65535:h:65535", "65536:h:1", "+1:h:1", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fw, err := ParseRemote(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tunnel: -R ") {
				t.Fatalf("ParseRemote(%q) error %q does not name the flag", s, err)
			}
			return
		}
		checkForward(t, s, fw)
		if fw.RemotePort == 0 || fw.Bind.IsValid() {
			t.Fatalf("ParseRemote(%q) = %+v: no pod port, or a bind", s, fw)
		}
		str := fw.String()
		back, err := ParseRemote(str)
		if err != nil || back != fw {
			t.Fatalf("ParseRemote(%q) = %+v; its String %q parses as %+v, %v", s, fw, str, back, err)
		}
		if back.String() != str {
			t.Fatalf("String not stable: %q then %q", str, back.String())
		}
	})
}

func FuzzParseSocks(f *testing.F) {
	for _, s := range []string{
		"1080", "127.0.0.1:1080", "[::1]:1080", "localhost:1080", "0.0.0.0:1080", "[fe80::1%eth0]:1080",
		"::1:1080", "[::ffff:127.0.0.1]:1080", "0", "65536", "1080:", ":1080", "[::1]", "[::1]x:1", "", "a:b:c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ap, err := ParseSocks(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tunnel: --socks ") {
				t.Fatalf("ParseSocks(%q) error %q does not name the flag", s, err)
			}
			return
		}
		if !ap.IsValid() || ap.Port() == 0 || ap.Addr().Is4In6() {
			t.Fatalf("ParseSocks(%q) = %v: not a valid bind", s, ap)
		}
		str := ap.String()
		back, err := ParseSocks(str)
		if err != nil || back != ap {
			t.Fatalf("ParseSocks(%q) = %v; %q parses as %v, %v", s, ap, str, back, err)
		}
	})
}

// checkForward fails t unless fw has what every accepted spec promises.
func checkForward(t *testing.T, s string, fw Forward) {
	t.Helper()
	if fw.Proto != "tcp" && fw.Proto != "udp" {
		t.Fatalf("%q: protocol %q", s, fw.Proto)
	}
	if fw.Port == 0 || fw.Host == "" || fw.ProxyProtocol {
		t.Fatalf("%q: bad destination in %+v", s, fw)
	}
	if _, err := netip.ParseAddr(fw.Host); err != nil && strings.ContainsAny(fw.Host, " \t/?#@%[]:") {
		t.Fatalf("%q: host %q is neither an address nor a name", s, fw.Host)
	}
}
