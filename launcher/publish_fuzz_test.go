package launcher_test

import (
	"strings"
	"testing"

	"github.com/meshlaunch/meshlaunch/launcher"
)

// FuzzParsePublish: ParsePublish never panics, errors name the spec, and
// an accepted spec has non-zero ports, tcp or udp, a valid bind, and
// renders (String) to a spec that parses to the same Publish.
func FuzzParsePublish(f *testing.F) {
	for _, s := range []string{
		"8080:80", "0.0.0.0:8080:80", "127.0.0.1:5353:53/udp", "[::1]:8080:80", "[fe80::1%eth0]:8080:80/tcp",
		"::1:8080:80", "[::ffff:127.0.0.1]:8080:80", "8080:80/sctp", "8080:0", "0:80", "8080:65536", "80",
		"host:8080:80", ":8080:80", "[]:8080:80", "8080:80/", "8080:80/tcp/udp", " 8080:80", "[[::1]]:1:2", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := launcher.ParsePublish(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "publish ") {
				t.Fatalf("ParsePublish(%q) error %q does not name the spec", s, err)
			}
			return
		}
		if p.Proto != "tcp" && p.Proto != "udp" {
			t.Fatalf("ParsePublish(%q): protocol %q", s, p.Proto)
		}
		if p.Port == 0 || !p.Bind.IsValid() || p.Bind.Port() == 0 {
			t.Fatalf("ParsePublish(%q) = %+v: a zero port or no bind", s, p)
		}
		str := p.String()
		back, err := launcher.ParsePublish(str)
		if err != nil || back != p {
			t.Fatalf("ParsePublish(%q) = %+v; its String %q parses as %+v, %v", s, p, str, back, err)
		}
		if back.String() != str {
			t.Fatalf("String not stable: %q then %q", str, back.String())
		}
	})
}
