package manifest

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// renderCase is one option set and what its manifest must be.
type renderCase struct {
	name string
	opts Options
	want want
}

// base is the want of Options{Name: "pod-a", Host: "mesh.example.org"};
// cases change what their options change.
func base() want {
	return want{name: "pod-a", namespace: "default", secretName: "pod-a", host: "mesh.example.org",
		image: "meshlaunch:latest", meshPort: 8080, ingressPath: "/"}
}

func renderCases() []renderCase {
	with := func(f func(*want)) want { w := base(); f(&w); return w }
	const token = "  given-secret-0123456789\n"
	return []renderCase{
		{"defaults", Options{Name: "pod-a", Host: "mesh.example.org"}, base()},
		{"docs example", Options{Name: "pod-a", Namespace: "jobs", Host: "mesh.example.org",
			Ports: []string{"9000", "5353/udp"}, Routes: []string{"10.96.0.0/12", "10.244.0.0/16"}},
			with(func(w *want) {
				w.namespace = "jobs"
				w.exposes = []string{"9000/tcp", "5353/udp"}
				w.routes = []string{"10.96.0.0/12", "10.244.0.0/16"}
			})},
		{"native sidecar", Options{Name: "pod-a", Host: "mesh.example.org", NativeSidecar: true,
			Ports: []string{"9000/tcp"}, Routes: []string{"10.96.0.0/12"}},
			with(func(w *want) {
				w.native = true
				w.exposes = []string{"9000/tcp"}
				w.routes = []string{"10.96.0.0/12"}
			})},
		{"low port", Options{Name: "pod-a", Host: "mesh.example.org", Ports: []string{"80", "53/udp", "8080/udp"}},
			with(func(w *want) {
				w.lowPort = true
				w.exposes = []string{"80/tcp", "53/udp", "8080/udp"}
			})},
		{"path prefix and TLS issuer", Options{Name: "pod-a", Host: "mesh.example.org",
			PathPrefix: "/mesh/pod-a/", ClusterIssuer: "letsencrypt-prod", Routes: []string{"0.0.0.0/0"}},
			with(func(w *want) {
				w.prefixArg, w.ingressPath = "/mesh/pod-a", "/mesh/pod-a"
				w.issuer, w.tlsSecret = "letsencrypt-prod", "pod-a-tls"
				w.routes = []string{"0.0.0.0/0"}
			})},
		{"given token, secret, image, TLS secret and mesh port", Options{Name: "job-7", Namespace: "hpc",
			Host: "job-7.mesh.example.org", Image: "registry.example.org:5000/hpc/meshlaunch:v1.2.3",
			TLSSecretName: "wildcard-mesh", SecretName: "job-7-mesh", Token: token, MeshPort: 9090,
			Ports: []string{"8080"}},
			want{name: "job-7", namespace: "hpc", secretName: "job-7-mesh", host: "job-7.mesh.example.org",
				image: "registry.example.org:5000/hpc/meshlaunch:v1.2.3", token: strings.TrimSpace(token),
				meshPort: 9090, exposes: []string{"8080/tcp"}, ingressPath: "/", tlsSecret: "wildcard-mesh"}},
		{"native sidecar on a low mesh port with everything", Options{Name: "pod-a", Host: "mesh.example.org",
			NativeSidecar: true, MeshPort: 443, PathPrefix: "/a", ClusterIssuer: "ca", TLSSecretName: "a-cert",
			Ports: []string{"8443/udp", "8443/tcp"}, Routes: []string{"10.96.0.0/12", "10.244.0.0/16"}},
			with(func(w *want) {
				w.native, w.lowPort, w.meshPort = true, true, 443
				w.prefixArg, w.ingressPath = "/a", "/a"
				w.issuer, w.tlsSecret = "ca", "a-cert"
				w.exposes = []string{"8443/udp", "8443/tcp"}
				w.routes = []string{"10.96.0.0/12", "10.244.0.0/16"}
			})},
	}
}

func renderObjects(t *testing.T, o Options) (objects, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := Render(&buf, o); err != nil {
		t.Fatalf("Render: %v", err)
	}
	objs, err := decodeStream(buf.Bytes())
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, buf.String())
	}
	return objs, buf.String()
}

func TestRender(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			objs, text := renderObjects(t, tc.opts)
			for _, p := range problems(objs, tc.want) {
				t.Error(p)
			}
			url := "ws://"
			if tc.want.tlsSecret != "" {
				url = "wss://"
			}
			url += tc.want.host + strings.TrimSuffix(tc.want.ingressPath, "/")
			if !strings.Contains(text, "meshlaunch run --server "+url+" ") {
				t.Errorf("the header does not show the server URL %s", url)
			}
			if !strings.Contains(text, "kubectl -n "+tc.want.namespace+" get secret "+tc.want.secretName+" -o jsonpath='{.data.token}'") {
				t.Error("the header does not show how to copy the secret")
			}
			if t.Failed() {
				t.Log(text)
			}
		})
	}
}

// TestRenderFreshToken checks that every Render without a token makes a new
// one (two shadow pods must never share a secret by accident).
func TestRenderFreshToken(t *testing.T) {
	o := Options{Name: "pod-a", Host: "mesh.example.org"}
	a, _ := renderObjects(t, o)
	b, _ := renderObjects(t, o)
	ta, tb := a.secret.StringData[tokenKey], b.secret.StringData[tokenKey]
	if ta == tb || len(ta) < 43 {
		t.Fatalf("tokens %q and %q: want two fresh 43-character secrets", ta, tb)
	}
}

func TestRenderInvalidWritesNothing(t *testing.T) {
	var buf bytes.Buffer
	err := Render(&buf, Options{Name: "Pod_A", Host: "mesh.example.org"})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "name" {
		t.Fatalf("Render(bad name) = %v, want a FieldError for --name", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("Render wrote %d bytes despite the error", buf.Len())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRenderWriteError(t *testing.T) {
	err := Render(failWriter{}, Options{Name: "pod-a", Host: "mesh.example.org"})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Render to a failing writer = %v", err)
	}
}
