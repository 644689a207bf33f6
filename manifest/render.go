package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/template"

	"github.com/meshlaunch/meshlaunch/identity"
)

// Fixed parts of the shadow pod. docs/kubernetes.md explains each.
const (
	// runAs is the uid and gid of both containers; deploy/Containerfile
	// sets the same USER (a test checks).
	runAs = 65532
	// tokenDir is where the Secret is mounted; tokenKey is its only key.
	tokenDir = "/var/run/meshlaunch"
	tokenKey = "token"
	// shutdownGrace is the sidecar's drain after SIGTERM; the pod's
	// terminationGracePeriodSeconds leaves 10 s on top for closing.
	shutdownGrace      = "25s"
	terminationSeconds = 35
	// goMemLimit keeps the Go heap under the container's 256Mi limit, so
	// the garbage collector works harder before the kernel kills.
	goMemLimit = "200MiB"
	// wsTimeout is ingress-nginx's read and send timeout in seconds: a
	// tunnel is one long-lived websocket (pings every 20 s keep it busy,
	// but a slow job must not be cut at nginx's default 60 s).
	wsTimeout = "3600"
)

// Render validates o and writes the shadow pod's objects to w as one YAML
// stream: a Secret with the shared secret, a Deployment, a Service and an
// Ingress, in that order, after a comment that says how the remote side
// gets the secret. Without o.Token it generates a fresh secret, so every
// call renders a different one. Invalid options are reported as by
// Validate and nothing is written.
func Render(w io.Writer, o Options) error {
	s, err := o.normalize()
	if err != nil {
		return err
	}
	if s.Token == "" {
		if s.Token, err = identity.NewToken(); err != nil {
			return fmt.Errorf("manifest: %w", err)
		}
	}
	return render(w, s, false)
}

// render writes s. placeholder marks s.Token as a stand-in for the
// committed examples, which must not carry a usable secret.
func render(w io.Writer, s spec, placeholder bool) error {
	var buf bytes.Buffer
	if err := shadowPod.Execute(&buf, newView(s, placeholder)); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("manifest: write: %w", err)
	}
	return nil
}

// view is what the template sees: s plus everything derived from it.
type view struct {
	spec
	Placeholder bool
	Exposed     []viewPort // Options.Ports as container and Service ports
	Args        []string
	LowPort     bool
	ServerURL   string
	Runs        int
	TokenDir    string
	TokenKey    string
	GoMemLimit  string
	Termination int
	WSTimeout   string
}

type viewPort struct {
	Name     string // the container and Service port name
	Num      int
	Protocol string // TCP or UDP
}

func newView(s spec, placeholder bool) view {
	v := view{spec: s, Placeholder: placeholder, LowPort: s.lowPort(), Runs: runAs,
		TokenDir: tokenDir, TokenKey: tokenKey, GoMemLimit: goMemLimit,
		Termination: terminationSeconds, WSTimeout: wsTimeout}
	v.Args = []string{"sidecar",
		"--listen", fmt.Sprintf(":%d", s.MeshPort),
		"--token-file", tokenDir + "/" + tokenKey,
		"--shutdown-grace", shutdownGrace,
	}
	if s.PathPrefix != "/" {
		v.Args = append(v.Args, "--path-prefix", s.PathPrefix)
	}
	for _, r := range s.Routes {
		v.Args = append(v.Args, "--route", r)
	}
	for _, p := range s.ports {
		v.Args = append(v.Args, "--expose", p.String())
		v.Exposed = append(v.Exposed, viewPort{Name: p.Proto + "-" + fmt.Sprint(p.Num), Num: p.Num, Protocol: strings.ToUpper(p.Proto)})
	}
	scheme := "ws"
	if s.TLSSecretName != "" {
		scheme = "wss"
	}
	v.ServerURL = scheme + "://" + s.Host + strings.TrimSuffix(s.PathPrefix, "/")
	return v
}

// Labels renders the objects' labels at indent n; Selector the subset
// that selects the pod.
func (v view) Labels(n int) string {
	return v.Selector(n) + "\n" + strings.Repeat(" ", n) + `app.kubernetes.io/component: "shadow-pod"`
}

func (v view) Selector(n int) string {
	ind := strings.Repeat(" ", n)
	return ind + `app.kubernetes.io/name: "meshlaunch"` + "\n" + ind + "app.kubernetes.io/instance: " + quote(v.Name)
}

// quote renders s as a YAML double-quoted scalar (a JSON string is one).
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

var shadowPod = template.Must(template.New("shadow pod").
	Funcs(template.FuncMap{"q": quote}).
	Option("missingkey=error").
	Parse(podTemplate))
