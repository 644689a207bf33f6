package manifest

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/meshlaunch/meshlaunch/identity"
)

// The checkers return "" for a valid value, else the reason it is not.

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1035Label = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
)

func checkDNS1123Label(s string) string {
	switch {
	case s == "":
		return "required"
	case len(s) > 63:
		return fmt.Sprintf("%d characters, at most 63", len(s))
	case !dns1123Label.MatchString(s):
		return "want lower-case letters, digits and '-', starting and ending with a letter or digit"
	}
	return ""
}

func checkDNS1035Label(s string) string {
	if msg := checkDNS1123Label(s); msg != "" {
		return msg
	}
	if !dns1035Label.MatchString(s) {
		return "must start with a letter"
	}
	return ""
}

// checkDNS1123Subdomain is Kubernetes' rule for object names: labels of
// any length, at most 253 characters in all.
func checkDNS1123Subdomain(s string) string {
	if len(s) > 253 {
		return fmt.Sprintf("%d characters, at most 253", len(s))
	}
	for _, l := range strings.Split(s, ".") {
		switch {
		case l == "" && s == "":
			return "required"
		case l == "":
			return "empty label between dots"
		case !dns1123Label.MatchString(l):
			return fmt.Sprintf("label %q: want lower-case letters, digits and '-', starting and ending with a letter or digit", l)
		}
	}
	return ""
}

// checkHost accepts what an Ingress rule's host may be, minus wildcards:
// a shadow pod has exactly one name.
func checkHost(s string) string {
	switch {
	case s == "":
		return "required: the DNS name the Ingress serves the websocket on"
	case strings.HasPrefix(s, "*."):
		return "wildcards are not supported: give this shadow pod's own name"
	case strings.Contains(s, "://") || strings.ContainsAny(s, "/:"):
		return "want a bare DNS name such as mesh.example.org, without scheme, port or path"
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return "an Ingress host must be a DNS name, not an IP address"
	}
	if strings.ToLower(s) != s {
		return "must be lower case"
	}
	if msg := checkDNS1123Subdomain(s); msg != "" {
		return msg
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) > 63 {
			return fmt.Sprintf("label %q: %d characters, DNS allows 63", l, len(l))
		}
	}
	return ""
}

// port is one exposed port, parsed.
type port struct {
	Num   int
	Proto string // "tcp" or "udp"
}

func (p port) String() string { return fmt.Sprintf("%d/%s", p.Num, p.Proto) }

// parsePort accepts the sidecar's --expose syntax, "8080", "8080/tcp" or
// "53/udp" (sidecar.ParsePort; a test keeps the two in step).
func parsePort(s string) (port, string) {
	num, proto, found := strings.Cut(strings.TrimSpace(s), "/")
	if !found {
		proto = "tcp"
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n == 0 {
		return port{}, "want PORT[/tcp|/udp] with PORT in 1-65535"
	}
	if proto != "tcp" && proto != "udp" {
		return port{}, fmt.Sprintf("protocol %q is not tcp or udp", proto)
	}
	return port{Num: int(n), Proto: proto}, ""
}

// parseRoute accepts what the sidecar accepts for --route: an IPv4 CIDR
// without host bits.
func parseRoute(s string) (netip.Prefix, string) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return p, "want a CIDR such as 10.96.0.0/12"
	case p != p.Masked():
		return p, fmt.Sprintf("host bits set; did you mean %s?", p.Masked())
	case !p.Addr().Is4():
		return p, "IPv6 routes are not supported by the sidecar yet"
	}
	return p, ""
}

// imageRef approximates the grammar of an OCI image reference:
// [registry[:port]/]path[:tag][@digest], path components lower case.
var imageRef = regexp.MustCompile(`^` +
	`(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` +
	`(?:@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,})?$`)

func checkImage(s string) string {
	if len(s) > 4096 || !imageRef.MatchString(s) {
		return "not an image reference such as registry.example.org/meshlaunch:v1.2.3"
	}
	return ""
}

// normalizePrefix returns the prefix as the Ingress path: "/" for the
// whole host, else "/a/b" without a trailing slash. Segments are limited to
// the characters ingress-nginx accepts in a Prefix path.
func normalizePrefix(s string) (string, string) {
	t := strings.Trim(s, "/")
	if t == "" {
		return "/", ""
	}
	if !strings.HasPrefix(s, "/") {
		return "", "must start with '/'"
	}
	for _, seg := range strings.Split(t, "/") {
		switch {
		case seg == "":
			return "", "empty path segment ('//')"
		case seg == "." || seg == "..":
			return "", "'.' and '..' segments are not allowed"
		case strings.IndexFunc(seg, notPathChar) >= 0:
			return "", "want letters, digits, '-', '.', '_' and '~' between slashes"
		}
	}
	return "/" + t, ""
}

func notPathChar(r rune) bool {
	return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("-._~", r)
}

// normalizeToken trims the secret as identity.Derive does and checks that
// it survives a YAML string and a one-line token file unchanged.
func normalizeToken(s string) (string, string) {
	t := strings.TrimSpace(s)
	switch {
	case len(t) < identity.MinSecretLen:
		return "", fmt.Sprintf("secret too short: %d bytes, need at least %d (make one with `meshlaunch token`)", len(t), identity.MinSecretLen)
	case !utf8.ValidString(t):
		return "", "secret is not valid UTF-8"
	case strings.IndexFunc(t, unicode.IsControl) >= 0:
		return "", "secret contains a line break or control character; a token file holds it on one line"
	}
	return t, ""
}
