package tunnel

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseLocal(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		spec string
		want Forward
	}{
		{"8080:web.default.svc:80", Forward{Proto: "tcp", Bind: netip.AddrPortFrom(lo, 8080), Host: "web.default.svc", Port: 80}},
		{"0.0.0.0:8080:10.0.0.5:80/tcp", Forward{Proto: "tcp", Bind: netip.MustParseAddrPort("0.0.0.0:8080"), Host: "10.0.0.5", Port: 80}},
		{"[::1]:5353:kube-dns.kube-system:53/udp", Forward{Proto: "udp", Bind: netip.MustParseAddrPort("[::1]:5353"), Host: "kube-dns.kube-system", Port: 53}},
		{"2222:[fd00::5]:22", Forward{Proto: "tcp", Bind: netip.AddrPortFrom(lo, 2222), Host: "fd00::5", Port: 22}},
		{"localhost:9000:db:5432", Forward{Proto: "tcp", Bind: netip.AddrPortFrom(lo, 9000), Host: "db", Port: 5432}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseLocal(tc.spec)
			if err != nil || got != tc.want {
				t.Fatalf("ParseLocal = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(string) error
		spec  string
		want  string // in the message, besides the right form
	}{
		{"-L too few fields", parseL, "8080:web", "2 fields"},
		{"-L bare IPv6", parseL, "8080:fd00::5:22", "brackets"},
		{"-L bad port", parseL, "8080:web:http", `destination port "http"`},
		{"-L port 0", parseL, "0:web:80", `local port "0"`},
		{"-L bad proto", parseL, "8080:web:80/sctp", `"sctp"`},
		{"-L bind is a name", parseL, "example.org:8080:web:80", "not an IP address"},
		{"-L empty host", parseL, "8080::80", "empty host"},
		{"-R with a bind address", parseR, "0.0.0.0:8080:localhost:80", "listens on all its addresses"},
		{"-R bad pod port", parseR, "99999:localhost:80", `pod port "99999"`},
		{"--socks bad", parseS, "127.0.0.1:x", `port "x"`},
		{"--socks too many", parseS, "a:b:c", "too many"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse(tc.spec)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "want ") {
				t.Fatalf("error %q does not say %q and show the right form", err, tc.want)
			}
		})
	}
}

func parseL(s string) error { _, err := ParseLocal(s); return err }
func parseR(s string) error { _, err := ParseRemote(s); return err }
func parseS(s string) error { _, err := ParseSocks(s); return err }

func TestParseRemoteAndSocks(t *testing.T) {
	f, err := ParseRemote("8888:localhost:8000/udp")
	if err != nil || f != (Forward{Proto: "udp", RemotePort: 8888, Host: "localhost", Port: 8000}) {
		t.Fatalf("ParseRemote = %+v, %v", f, err)
	}
	for spec, want := range map[string]string{"1080": "127.0.0.1:1080", "0.0.0.0:1080": "0.0.0.0:1080", "[::1]:1080": "[::1]:1080"} {
		got, err := ParseSocks(spec)
		if err != nil || got.String() != want {
			t.Errorf("ParseSocks(%q) = %v, %v; want %s", spec, got, err, want)
		}
	}
}

func TestProxyHeader(t *testing.T) {
	for _, tc := range []struct{ client, server, want string }{
		{"10.0.0.7:51000", "10.0.0.5:8080", "PROXY TCP4 10.0.0.7 10.0.0.5 51000 8080\r\n"},
		{"[::ffff:10.0.0.7]:1", "10.0.0.5:2", "PROXY TCP4 10.0.0.7 10.0.0.5 1 2\r\n"},
		{"[fd00::7]:1", "[fd00::5]:2", "PROXY TCP6 fd00::7 fd00::5 1 2\r\n"},
		{"[fd00::7]:1", "10.0.0.5:2", "PROXY UNKNOWN\r\n"},
		{"", "10.0.0.5:2", "PROXY UNKNOWN\r\n"},
	} {
		if got := proxyHeader(tc.client, tc.server); got != tc.want {
			t.Errorf("proxyHeader(%q, %q) = %q, want %q", tc.client, tc.server, got, tc.want)
		}
	}
}

func TestAddrHeaderRoundTrip(t *testing.T) {
	for _, s := range []string{"10.1.2.3:53", "[fd00::1]:5353"} {
		a := netip.MustParseAddrPort(s)
		got, payload, err := splitAddrHeader(append(appendAddrHeader(nil, a), "x"...))
		if err != nil || got != a || string(payload) != "x" {
			t.Errorf("%s: got %v %q %v", s, got, payload, err)
		}
	}
	if _, _, err := splitAddrHeader(make([]byte, addrHeaderLen-1)); err == nil {
		t.Error("short header accepted")
	}
}
