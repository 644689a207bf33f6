package manifest

import (
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// want is what a rendered shadow pod must look like, stated by each test
// case rather than computed by the code under test.
type want struct {
	name, namespace, secretName, host, image string
	token                                    string   // "" = any valid secret
	meshPort                                 int32    // the sidecar's listener
	exposes                                  []string // --expose values, canonical
	routes                                   []string // --route values
	prefixArg                                string   // --path-prefix; "" = none
	ingressPath                              string
	tlsSecret, issuer                        string
	native                                   bool
	lowPort                                  bool // the unprivileged-port sysctl is set
}

// problems lists every way o differs from w; nil if none. Each check is
// one line so that a broken manifest names what broke.
func problems(o objects, w want) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	checkSecret(o.secret, w, add)
	checkDeployment(o.deploy, w, add)
	checkService(o.svc, o.deploy, w, add)
	checkIngress(o.ingress, o.svc, w, add)
	return p
}

type adder func(format string, args ...any)

func checkMeta(kind, name, namespace string, w want, add adder) {
	if namespace != w.namespace {
		add("%s %s: namespace %q, want %q", kind, name, namespace, w.namespace)
	}
}

func checkSecret(s *corev1.Secret, w want, add adder) {
	checkMeta("Secret", s.Name, s.Namespace, w, add)
	if s.Name != w.secretName {
		add("Secret name %q, want %q", s.Name, w.secretName)
	}
	if s.Type != corev1.SecretTypeOpaque {
		add("Secret type %q, want Opaque", s.Type)
	}
	if len(s.Data) != 0 || len(s.StringData) != 1 {
		add("Secret holds %d data and %d stringData keys, want only stringData %q", len(s.Data), len(s.StringData), tokenKey)
	}
	tok := s.StringData[tokenKey]
	switch {
	case w.token != "" && tok != w.token:
		add("Secret token %q, want the given %q", tok, w.token)
	case w.token == "" && len(tok) < 16:
		add("Secret token %q: shorter than 16 bytes", tok)
	}
}

func checkDeployment(d *appsv1.Deployment, w want, add adder) {
	checkMeta("Deployment", d.Name, d.Namespace, w, add)
	if d.Name != w.name {
		add("Deployment name %q, want %q", d.Name, w.name)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		add("Deployment replicas %v, want 1", deref(d.Spec.Replicas))
	}
	if sel := d.Spec.Selector; sel == nil || len(sel.MatchLabels) == 0 ||
		!labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		add("Deployment selector %v does not select its pod template %v", d.Spec.Selector, d.Spec.Template.Labels)
	}
	ps := d.Spec.Template.Spec
	checkPod(ps, w, add)
	mesh := meshContainer(ps, w, add)
	if mesh == nil {
		return
	}
	for _, c := range allContainers(ps) {
		checkContainerSecurity(c, add)
	}
	args := checkArgs(mesh, ps, w, add)
	checkEnv(mesh, add)
	checkPorts(mesh, w, add)
	checkProbes(mesh, w, add)
	checkResources(mesh, add)
	if g, err := time.ParseDuration(args["--shutdown-grace"]); err != nil || ps.TerminationGracePeriodSeconds == nil ||
		time.Duration(*ps.TerminationGracePeriodSeconds)*time.Second <= g {
		add("terminationGracePeriodSeconds %v is not above --shutdown-grace %q", deref(ps.TerminationGracePeriodSeconds), args["--shutdown-grace"])
	}
	if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds != 35 {
		add("terminationGracePeriodSeconds %v, want 35", deref(ps.TerminationGracePeriodSeconds))
	}
}

func allContainers(ps corev1.PodSpec) []corev1.Container {
	return append(slices.Clone(ps.InitContainers), ps.Containers...)
}

// checkPod checks the pod-level settings.
func checkPod(ps corev1.PodSpec, w want, add adder) {
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		add("pod shares a host namespace")
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		add("pod mounts a service account token")
	}
	if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
		add("pod has service links (MESHLAUNCH_SERVICE_* variables)")
	}
	sc := ps.SecurityContext
	if sc == nil {
		add("pod has no securityContext")
		return
	}
	if !isTrue(sc.RunAsNonRoot) || !is(sc.RunAsUser, runAs) || !is(sc.RunAsGroup, runAs) || !is(sc.FSGroup, runAs) {
		add("pod securityContext: runAsNonRoot %v, runAsUser %v, runAsGroup %v, fsGroup %v; want true and %d",
			deref(sc.RunAsNonRoot), deref(sc.RunAsUser), deref(sc.RunAsGroup), deref(sc.FSGroup), runAs)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		add("pod seccompProfile %v, want RuntimeDefault", sc.SeccompProfile)
	}
	var sysctl []corev1.Sysctl
	for _, s := range sc.Sysctls {
		if s.Name == "net.ipv4.ip_unprivileged_port_start" {
			sysctl = append(sysctl, s)
		} else {
			add("pod sets sysctl %s", s.Name)
		}
	}
	switch {
	case w.lowPort && (len(sysctl) != 1 || sysctl[0].Value != "0"):
		add("a port below 1024 is bound, but the sysctls are %v; want net.ipv4.ip_unprivileged_port_start=0", sc.Sysctls)
	case !w.lowPort && len(sysctl) > 0:
		add("no port below 1024, but net.ipv4.ip_unprivileged_port_start is set")
	}
	var tok *corev1.Volume
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == "token" {
			tok = &ps.Volumes[i]
		}
	}
	if len(ps.Volumes) != 1 || tok == nil || tok.Secret == nil {
		add("pod volumes %v, want only the token Secret", ps.Volumes)
		return
	}
	if tok.Secret.SecretName != w.secretName || !is(tok.Secret.DefaultMode, 0o440) ||
		len(tok.Secret.Items) != 1 || tok.Secret.Items[0] != (corev1.KeyToPath{Key: tokenKey, Path: tokenKey}) {
		add("token volume: Secret %q, mode %#o, items %v; want Secret %q, mode 0440, item %q",
			tok.Secret.SecretName, deref(tok.Secret.DefaultMode), tok.Secret.Items, w.secretName, tokenKey)
	}
}

// meshContainer finds the sidecar: the only main container, or a native
// sidecar (an init container with restartPolicy Always) next to pause.
func meshContainer(ps corev1.PodSpec, w want, add adder) *corev1.Container {
	if !w.native {
		if len(ps.InitContainers) != 0 || len(ps.Containers) != 1 || ps.Containers[0].Name != "meshlaunch" {
			add("want one container, meshlaunch, and no init containers; have %d and %d", len(ps.Containers), len(ps.InitContainers))
			return nil
		}
		return &ps.Containers[0]
	}
	if len(ps.InitContainers) != 1 || ps.InitContainers[0].Name != "meshlaunch" {
		add("native sidecar: want the init container meshlaunch, have %d init containers", len(ps.InitContainers))
		return nil
	}
	c := &ps.InitContainers[0]
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		add("native sidecar: init container restartPolicy %v, want Always", c.RestartPolicy)
	}
	if c.StartupProbe == nil || c.StartupProbe.HTTPGet == nil || c.StartupProbe.HTTPGet.Path != "/readyz" {
		add("native sidecar: no startupProbe on /readyz, so main containers start before the mesh is up")
	}
	if len(ps.Containers) != 1 || ps.Containers[0].Name != "pause" || ps.Containers[0].Image != DefaultPauseImage ||
		len(ps.Containers[0].Command)+len(ps.Containers[0].Args) != 0 {
		add("native sidecar: want the one main container pause (%s, no command), have %d", DefaultPauseImage, len(ps.Containers))
	}
	return c
}

func isTrue(b *bool) bool { return b != nil && *b }

func is[T comparable](v *T, want T) bool { return v != nil && *v == want }

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
