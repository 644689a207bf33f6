package wsproxy

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseServerURL: an accepted URL is ws or wss with a host and no
// credentials, query or fragment, and its String parses to the same URL.
func FuzzParseServerURL(f *testing.F) {
	for _, s := range []string{
		"ws://sidecar:8080/mesh", "wss://example.com/prefix/", "wss://[::1]:443", "ws://10.0.0.1", " wss://h/p ",
		"wss://user:pass@h/", "wss://h/?x=1", "wss://h/#frag", "wss://h/?", "http://h/", "WSS://h/", "wss://:443/",
		"wss:///path", "wss://h/a%2Fb", "wss://h/a b", "wss://[fe80::1%25eth0]:443/", "wss:h", "//h/", "", "wss://h//",
		"wss://@h/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseServerURL(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "wsproxy: server URL ") {
				t.Fatalf("ParseServerURL(%q) error %q does not say what failed", s, err)
			}
			return
		}
		switch {
		case u.Scheme != "ws" && u.Scheme != "wss":
			t.Fatalf("ParseServerURL(%q): scheme %q", s, u.Scheme)
		case u.Hostname() == "":
			t.Fatalf("ParseServerURL(%q): no host in %#v", s, u)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
			t.Fatalf("ParseServerURL(%q): credentials, query or fragment in %#v", s, u)
		case u.Opaque != "":
			t.Fatalf("ParseServerURL(%q): opaque URL %#v", s, u)
		}
		// RawPath is only a hint (the original escaping, if it differs
		// from the default); compare the rest and the rendered form.
		str := u.String()
		back, err := ParseServerURL(str)
		if err != nil {
			t.Fatalf("ParseServerURL(%q) = %#v; its String %q fails: %v", s, u, str, err)
		}
		if back.String() != str {
			t.Fatalf("ParseServerURL(%q): String not stable: %q then %q", s, str, back.String())
		}
		b, v := *back, *u
		b.RawPath, v.RawPath = "", ""
		if !reflect.DeepEqual(b, v) {
			t.Fatalf("ParseServerURL(%q) = %#v; its String %q parses as %#v", s, u, str, back)
		}
	})
}
