package manifest

import (
	"errors"
	"fmt"
	"net/netip"
)

// Defaults for the optional fields of Options.
const (
	DefaultNamespace  = "default"
	DefaultImage      = "meshlaunch:latest"
	DefaultPauseImage = "registry.k8s.io/pause:3.10"
	DefaultMeshPort   = 8080
)

// Options describe one shadow pod. The zero value of every optional field
// means its default. Each field corresponds to a flag of `meshlaunch
// manifest`, named in the field's comment; FieldError.Field uses that name.
type Options struct {
	// Name names the Secret (unless SecretName is set), the Deployment, the
	// Service and the Ingress, and labels the pod (--name). Required; a
	// DNS-1035 label (lower case letters, digits and '-', starting with a
	// letter, at most 63 characters) because it names a Service.
	Name string
	// Namespace of every object (--namespace); a DNS-1123 label. Empty
	// means DefaultNamespace.
	Namespace string
	// Host is the DNS name the Ingress serves the websocket on (--host),
	// for example "mesh.example.org". Required; a lower-case DNS name, not
	// an IP address and not a wildcard.
	Host string
	// Ports are the pod ports forwarded to the job, in the sidecar's
	// --expose syntax "PORT[/tcp|/udp]" (--expose, repeatable). Each is
	// also a port of the Service. None means the cluster cannot connect to
	// the job. A TCP port may not be MeshPort, which the sidecar itself
	// listens on.
	Ports []string
	// Routes are the IPv4 CIDRs the job sends through the mesh (--route,
	// repeatable), usually the cluster's Service and pod ranges.
	Routes []string
	// Image is the meshlaunch container image (--image). Empty means
	// DefaultImage; push the image built by `make image` to a registry the
	// cluster can pull from and name it here.
	Image string
	// PathPrefix is the Ingress path the websocket is served under
	// (--path-prefix), for sharing one host between shadow pods: "/pod-a"
	// makes the server URL wss://HOST/pod-a. Empty or "/" means the whole
	// host. The sidecar is given the same prefix.
	PathPrefix string
	// TLSSecretName is the Secret holding the Ingress's certificate
	// (--tls-secret). Empty with ClusterIssuer set means Name+"-tls"; empty
	// without ClusterIssuer means no TLS section (the controller's default
	// certificate, if any, serves the host).
	TLSSecretName string
	// ClusterIssuer is a cert-manager ClusterIssuer that issues the Ingress's
	// certificate (--cluster-issuer). Empty means none.
	ClusterIssuer string
	// NativeSidecar runs meshlaunch as a Kubernetes native sidecar (an init
	// container with restartPolicy Always, Kubernetes 1.29 or later) next to
	// a placeholder main container running PauseImage (--native-sidecar).
	NativeSidecar bool
	// SecretName is the Secret holding the shared secret (--secret-name).
	// Empty means Name.
	SecretName string
	// Token is the shared secret (the content of --token-file). Empty means
	// a fresh one from identity.NewToken; either way the remote side needs
	// the same secret (see docs/kubernetes.md). Surrounding white space is
	// dropped; what remains must be at least identity.MinSecretLen bytes on
	// one line.
	Token string
	// MeshPort is the port the sidecar serves the websocket, probes and
	// metrics on (--mesh-port). Zero means DefaultMeshPort. Change it only to
	// expose the default port to the job.
	MeshPort int
	// PauseImage is the placeholder main container's image when
	// NativeSidecar is set (--pause-image). Empty means DefaultPauseImage,
	// the image the kubelet already runs in every pod's sandbox.
	PauseImage string
}

// FieldError is an invalid option. Field is the `meshlaunch manifest` flag
// the option corresponds to ("name", "expose", ...); Value is what was
// given (empty for secrets).
type FieldError struct {
	Field  string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("manifest: --%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("manifest: --%s %q: %s", e.Field, e.Value, e.Reason)
}

// Validate reports every invalid option, each as a *FieldError, joined with
// errors.Join; nil if Render would accept o.
func (o Options) Validate() error {
	_, err := o.normalize()
	return err
}

// spec is a validated Options with every default filled in.
type spec struct {
	Options        // PathPrefix is "/" or "/a/b"; Token is trimmed
	ports   []port // Options.Ports parsed, in order
}

// lowPort reports whether the sidecar binds a port below 1024, which needs
// the pod sysctl net.ipv4.ip_unprivileged_port_start.
func (s spec) lowPort() bool {
	if s.MeshPort < 1024 {
		return true
	}
	for _, p := range s.ports {
		if p.Num < 1024 {
			return true
		}
	}
	return false
}

// normalize checks o and fills in defaults.
func (o Options) normalize() (spec, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.PauseImage == "" {
		o.PauseImage = DefaultPauseImage
	}
	if o.MeshPort == 0 {
		o.MeshPort = DefaultMeshPort
	}
	errs := o.checkNames()
	ports, perrs := o.parsePorts()
	errs = append(errs, perrs...)
	errs = append(errs, o.checkRoutes()...)
	prefix, msg := normalizePrefix(o.PathPrefix)
	if msg != "" {
		errs = append(errs, &FieldError{Field: "path-prefix", Value: o.PathPrefix, Reason: msg})
	}
	o.PathPrefix = prefix
	if o.Token != "" {
		o.Token, msg = normalizeToken(o.Token)
		if msg != "" {
			errs = append(errs, &FieldError{Field: "token-file", Reason: msg}) // never quote a secret
		}
	}
	if o.SecretName == "" {
		o.SecretName = o.Name
	}
	if o.TLSSecretName == "" && o.ClusterIssuer != "" {
		o.TLSSecretName = o.Name + "-tls"
	}
	return spec{Options: o, ports: ports}, errors.Join(errs...)
}

// checkNames checks the names, the host, the images and the mesh port.
// Empty optional names are defaults derived from a valid Name.
func (o Options) checkNames() []error {
	var errs []error
	check := func(field, value, msg, hint string) {
		if msg != "" {
			errs = append(errs, &FieldError{Field: field, Value: value, Reason: msg + hint})
		}
	}
	check("name", o.Name, checkDNS1035Label(o.Name), " (it names the Service, so it must be a DNS-1035 label)")
	check("namespace", o.Namespace, checkDNS1123Label(o.Namespace), " (a namespace is a DNS-1123 label)")
	check("host", o.Host, checkHost(o.Host), "")
	if o.MeshPort < 1 || o.MeshPort > 65535 {
		check("mesh-port", fmt.Sprint(o.MeshPort), "want a port in 1-65535", "")
	}
	check("image", o.Image, checkImage(o.Image), "")
	check("pause-image", o.PauseImage, checkImage(o.PauseImage), "")
	for _, n := range []struct{ field, value string }{
		{"secret-name", o.SecretName}, {"tls-secret", o.TLSSecretName}, {"cluster-issuer", o.ClusterIssuer},
	} {
		if n.value != "" {
			check(n.field, n.value, checkDNS1123Subdomain(n.value), " (a DNS-1123 subdomain)")
		}
	}
	return errs
}

// parsePorts parses o.Ports and rejects duplicates and the sidecar's own
// listener port (the sidecar would fail to bind it).
func (o Options) parsePorts() ([]port, []error) {
	var errs []error
	var ports []port
	seen := map[port]string{}
	for _, s := range o.Ports {
		p, msg := parsePort(s)
		switch {
		case msg != "":
		case seen[p] != "":
			msg = fmt.Sprintf("same port as --expose %q", seen[p])
		case p.Proto == "tcp" && p.Num == o.MeshPort:
			msg = fmt.Sprintf("the sidecar itself listens on %d/tcp (--mesh-port); expose another port or move the sidecar with --mesh-port", o.MeshPort)
		}
		if msg != "" {
			errs = append(errs, &FieldError{Field: "expose", Value: s, Reason: msg})
			continue
		}
		seen[p] = s
		ports = append(ports, p)
	}
	return ports, errs
}

// checkRoutes rejects routes the sidecar would refuse, and duplicates.
func (o Options) checkRoutes() []error {
	var errs []error
	seen := map[netip.Prefix]bool{}
	for _, s := range o.Routes {
		p, msg := parseRoute(s)
		if msg == "" && seen[p] {
			msg = "given twice"
		}
		if msg != "" {
			errs = append(errs, &FieldError{Field: "route", Value: s, Reason: msg})
		}
		seen[p] = true
	}
	return errs
}
