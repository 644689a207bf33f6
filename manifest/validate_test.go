package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshlaunch/meshlaunch/sidecar"
)

// valid is a complete, valid Options; rows change one field.
func valid() Options {
	return Options{Name: "pod-a", Host: "mesh.example.org", Ports: []string{"9000"}, Routes: []string{"10.96.0.0/12"}}
}

func TestValidateErrors(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name   string
		change func(*Options)
		field  string // FieldError.Field
		reason string // substring of the message
	}{
		{"no name", func(o *Options) { o.Name = "" }, "name", "required"},
		{"upper-case name", func(o *Options) { o.Name = "Pod-A" }, "name", "lower-case letters"},
		{"name with underscore", func(o *Options) { o.Name = "pod_a" }, "name", "lower-case letters"},
		{"name starting with a digit", func(o *Options) { o.Name = "1pod" }, "name", "must start with a letter"},
		{"name ending with a dash", func(o *Options) { o.Name = "pod-" }, "name", "ending with a letter or digit"},
		{"long name", func(o *Options) { o.Name = long }, "name", "64 characters, at most 63"},
		{"namespace with a dot", func(o *Options) { o.Namespace = "jobs.hpc" }, "namespace", "DNS-1123 label"},
		{"upper-case namespace", func(o *Options) { o.Namespace = "Jobs" }, "namespace", "lower-case"},
		{"no host", func(o *Options) { o.Host = "" }, "host", "required"},
		{"wildcard host", func(o *Options) { o.Host = "*.example.org" }, "host", "wildcards are not supported"},
		{"host with scheme", func(o *Options) { o.Host = "https://mesh.example.org" }, "host", "without scheme, port or path"},
		{"host with port", func(o *Options) { o.Host = "mesh.example.org:443" }, "host", "without scheme, port or path"},
		{"host with path", func(o *Options) { o.Host = "mesh.example.org/pod-a" }, "host", "without scheme, port or path"},
		{"IP host", func(o *Options) { o.Host = "192.0.2.1" }, "host", "not an IP address"},
		{"upper-case host", func(o *Options) { o.Host = "Mesh.example.org" }, "host", "must be lower case"},
		{"empty host label", func(o *Options) { o.Host = "mesh..example.org" }, "host", "empty label"},
		{"bad host label", func(o *Options) { o.Host = "-mesh.example.org" }, "host", `label "-mesh"`},
		{"long host label", func(o *Options) { o.Host = long + ".example.org" }, "host", "64 characters, DNS allows 63"},
		{"port 0", func(o *Options) { o.Ports = []string{"0"} }, "expose", "PORT in 1-65535"},
		{"port 65536", func(o *Options) { o.Ports = []string{"65536"} }, "expose", "PORT in 1-65535"},
		{"port name", func(o *Options) { o.Ports = []string{"http"} }, "expose", "PORT in 1-65535"},
		{"empty port", func(o *Options) { o.Ports = []string{""} }, "expose", "PORT in 1-65535"},
		{"sctp", func(o *Options) { o.Ports = []string{"80/sctp"} }, "expose", `protocol "sctp" is not tcp or udp`},
		{"upper-case protocol", func(o *Options) { o.Ports = []string{"80/TCP"} }, "expose", `protocol "TCP"`},
		{"the sidecar's own port", func(o *Options) { o.Ports = []string{"8080"} }, "expose", "the sidecar itself listens on 8080/tcp"},
		{"the moved sidecar's port", func(o *Options) { o.MeshPort = 9000 }, "expose", "the sidecar itself listens on 9000/tcp"},
		{"duplicate port", func(o *Options) { o.Ports = []string{"9000", "9000/tcp"} }, "expose", `same port as --expose "9000"`},
		{"mesh port 0 after default", func(o *Options) { o.MeshPort = 70000 }, "mesh-port", "1-65535"},
		{"negative mesh port", func(o *Options) { o.MeshPort = -1 }, "mesh-port", "1-65535"},
		{"route with host bits", func(o *Options) { o.Routes = []string{"10.96.0.1/12"} }, "route", "did you mean 10.96.0.0/12?"},
		{"route without length", func(o *Options) { o.Routes = []string{"10.96.0.0"} }, "route", "want a CIDR"},
		{"IPv6 route", func(o *Options) { o.Routes = []string{"fd00::/64"} }, "route", "IPv6 routes are not supported"},
		{"duplicate route", func(o *Options) { o.Routes = []string{"10.96.0.0/12", "10.96.0.0/12"} }, "route", "given twice"},
		{"upper-case image", func(o *Options) { o.Image = "Meshlaunch:latest" }, "image", "not an image reference"},
		{"image with space", func(o *Options) { o.Image = "meshlaunch latest" }, "image", "not an image reference"},
		{"image URL", func(o *Options) { o.Image = "https://ghcr.io/meshlaunch" }, "image", "not an image reference"},
		{"image YAML", func(o *Options) { o.Image = "x\"\n  privileged: true" }, "image", "not an image reference"},
		{"bad pause image", func(o *Options) { o.PauseImage = "pause:" }, "pause-image", "not an image reference"},
		{"relative prefix", func(o *Options) { o.PathPrefix = "mesh" }, "path-prefix", "must start with '/'"},
		{"double slash", func(o *Options) { o.PathPrefix = "/a//b" }, "path-prefix", "empty path segment"},
		{"dot-dot", func(o *Options) { o.PathPrefix = "/a/../b" }, "path-prefix", "'..' segments"},
		{"query", func(o *Options) { o.PathPrefix = "/a?b=c" }, "path-prefix", "letters, digits"},
		{"space", func(o *Options) { o.PathPrefix = "/a b" }, "path-prefix", "letters, digits"},
		{"bad secret name", func(o *Options) { o.SecretName = "Secret" }, "secret-name", "DNS-1123 subdomain"},
		{"bad TLS secret", func(o *Options) { o.TLSSecretName = "a_b" }, "tls-secret", "DNS-1123 subdomain"},
		{"bad issuer", func(o *Options) { o.ClusterIssuer = "lets encrypt" }, "cluster-issuer", "DNS-1123 subdomain"},
		{"short token", func(o *Options) { o.Token = "  short-secret \n" }, "token-file", "12 bytes, need at least 16"},
		{"two-line token", func(o *Options) { o.Token = "0123456789\nabcdefghij" }, "token-file", "line break"},
		{"binary token", func(o *Options) { o.Token = "0123456789abcdef\xff" }, "token-file", "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.change(&o)
			err := o.Validate()
			fe := fieldErrors(err)
			if len(fe) != 1 {
				t.Fatalf("Validate() = %v, want exactly one error for --%s", err, tc.field)
			}
			if fe[0].Field != tc.field || !strings.Contains(fe[0].Error(), tc.reason) {
				t.Fatalf("Validate() = %q, want --%s: ...%s...", fe[0], tc.field, tc.reason)
			}
			if !strings.HasPrefix(fe[0].Error(), "manifest: --"+tc.field) {
				t.Fatalf("error %q does not start with the flag", fe[0])
			}
		})
	}
}

// fieldErrors unpacks what Validate joined.
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			out = append(out, fieldErrors(e)...)
		}
		return out
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		out = append(out, fe)
	}
	return out
}

func TestValidateReportsEverything(t *testing.T) {
	err := Options{Ports: []string{"x", "0/udp"}, Routes: []string{"bad"}}.Validate()
	var got []string
	for _, fe := range fieldErrors(err) {
		got = append(got, fe.Field)
	}
	want := "name host expose expose route"
	if strings.Join(got, " ") != want {
		t.Fatalf("Validate(many errors) reported %q, want %q\n%v", got, want, err)
	}
}

func TestValidateSecretNotInMessage(t *testing.T) {
	err := Options{Name: "pod-a", Host: "mesh.example.org", Token: "secret\x00value-0123456789"}.Validate()
	if err == nil || strings.Contains(err.Error(), "value-0123456789") {
		t.Fatalf("Validate(bad token) = %v: want an error that does not quote the secret", err)
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Options)
	}{
		{"63-character name", func(o *Options) { o.Name = strings.Repeat("a", 63) }},
		{"single-label host", func(o *Options) { o.Host = "mesh" }},
		{"port range ends", func(o *Options) { o.Ports = []string{"1/udp", "65535/tcp", " 9000 "} }},
		{"the mesh port over UDP", func(o *Options) { o.Ports = []string{"8080/udp"} }},
		{"no ports, no routes", func(o *Options) { o.Ports, o.Routes = nil, nil }},
		{"default route", func(o *Options) { o.Routes = []string{"0.0.0.0/0"} }},
		{"prefix characters", func(o *Options) { o.PathPrefix = "/a.b_c~d-E/9/" }},
		{"root prefix", func(o *Options) { o.PathPrefix = "/" }},
		{"registry port, tag and digest", func(o *Options) {
			o.Image = "registry.example.org:5000/hpc/mesh_launch:v1.2.3@sha256:" + strings.Repeat("ab", 32)
		}},
		{"token with spaces inside", func(o *Options) { o.Token = "correct horse battery staple\n" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.change(&o)
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestParsePortAgreesWithSidecar keeps --expose's grammar the sidecar's.
func TestParsePortAgreesWithSidecar(t *testing.T) {
	for _, s := range []string{"1", "80", "8080/tcp", "53/udp", "65535", " 9000 ", "0", "65536", "-1", "+80",
		"80/", "/tcp", "80/TCP", "80/sctp", "80/tcp/udp", "0x50", "", "http"} {
		p, msg := parsePort(s)
		sp, err := sidecar.ParsePort(s)
		if (msg == "") != (err == nil) || (err == nil && fmt.Sprint(p) != fmt.Sprint(sp)) {
			t.Errorf("%q: manifest says %v %q, sidecar says %v %v", s, p, msg, sp, err)
		}
	}
}

// TestNamesAgreeWithKubernetes checks the name checkers against
// apimachinery's, and that generated port names are valid.
func TestNamesAgreeWithKubernetes(t *testing.T) {
	names := []string{"a", "pod-a", "pod-a-1", "1pod", "Pod", "pod_a", "pod-", "-pod", "a.b", "a..b", ".a",
		"xn--bcher-kva", strings.Repeat("a", 63), strings.Repeat("a", 64), "", "a b", "ä"}
	for _, n := range names {
		if got, want := checkDNS1123Label(n) == "", len(validation.IsDNS1123Label(n)) == 0; got != want {
			t.Errorf("DNS-1123 label %q: ours %v, Kubernetes %v", n, got, want)
		}
		if got, want := checkDNS1035Label(n) == "", len(validation.IsDNS1035Label(n)) == 0; got != want {
			t.Errorf("DNS-1035 label %q: ours %v, Kubernetes %v", n, got, want)
		}
		if got, want := checkDNS1123Subdomain(n) == "", len(validation.IsDNS1123Subdomain(n)) == 0; got != want {
			t.Errorf("DNS-1123 subdomain %q: ours %v, Kubernetes %v", n, got, want)
		}
	}
	long := strings.Repeat(strings.Repeat("a", 63)+".", 4)[:254]
	if checkDNS1123Subdomain(long) == "" {
		t.Errorf("254-character subdomain accepted")
	}
	s, err := Options{Name: "pod-a", Host: "mesh.example.org", Ports: []string{"1", "65535/udp"}}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range newView(s, false).Exposed {
		if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
			t.Errorf("port name %q: %v", p.Name, errs)
		}
	}
}
