package manifest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Checks of one container: security, the sidecar's arguments, environment,
// ports, probes and resources.

func checkContainerSecurity(c corev1.Container, add adder) {
	sc := c.SecurityContext
	if sc == nil {
		add("container %s has no securityContext", c.Name)
		return
	}
	if !isTrue(sc.RunAsNonRoot) || !is(sc.RunAsUser, runAs) || !is(sc.RunAsGroup, runAs) {
		add("container %s: runAsNonRoot %v, runAsUser %v, runAsGroup %v; want true and %d",
			c.Name, deref(sc.RunAsNonRoot), deref(sc.RunAsUser), deref(sc.RunAsGroup), runAs)
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		add("container %s: readOnlyRootFilesystem is not true", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		add("container %s: allowPrivilegeEscalation is not false", c.Name)
	}
	if isTrue(sc.Privileged) {
		add("container %s is privileged", c.Name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		add("container %s: capabilities %v, want drop ALL and add none", c.Name, sc.Capabilities)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		add("container %s: seccompProfile %v, want RuntimeDefault", c.Name, sc.SeccompProfile)
	}
	if sc.ProcMount != nil || sc.SELinuxOptions != nil || sc.WindowsOptions != nil {
		add("container %s: unexpected procMount, SELinux or Windows options", c.Name)
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 || p.HostIP != "" {
			add("container %s: port %s uses the host's network", c.Name, p.Name)
		}
	}
	if c.Resources.Limits.Memory().IsZero() {
		add("container %s has no memory limit", c.Name)
	}
}

// checkArgs checks the sidecar's command line and returns its single-valued
// flags.
func checkArgs(c *corev1.Container, ps corev1.PodSpec, w want, add adder) map[string]string {
	if c.Image != w.image {
		add("sidecar image %q, want %q", c.Image, w.image)
	}
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "sidecar" {
		add("sidecar command %q args %q: want the image's entrypoint running \"sidecar\"", c.Command, c.Args)
		return map[string]string{}
	}
	single := map[string]string{}
	multi := map[string][]string{}
	for i := 1; i < len(c.Args); i += 2 {
		flag := c.Args[i]
		if !strings.HasPrefix(flag, "--") || i+1 == len(c.Args) {
			add("sidecar args: %q is not a flag with a value", flag)
			break
		}
		v := c.Args[i+1]
		switch flag {
		case "--route", "--expose":
			multi[flag] = append(multi[flag], v)
		default:
			if _, dup := single[flag]; dup {
				add("sidecar args: %s given twice", flag)
			}
			single[flag] = v
		}
	}
	if got := single["--listen"]; got != fmt.Sprintf(":%d", w.meshPort) {
		add("sidecar --listen %q, want :%d", got, w.meshPort)
	}
	if got := single["--path-prefix"]; got != w.prefixArg {
		add("sidecar --path-prefix %q, want %q", got, w.prefixArg)
	}
	if !slices.Equal(multi["--route"], w.routes) {
		add("sidecar --route %q, want %q", multi["--route"], w.routes)
	}
	if !slices.Equal(multi["--expose"], w.exposes) {
		add("sidecar --expose %q, want %q", multi["--expose"], w.exposes)
	}
	checkTokenFile(c, ps, single["--token-file"], w, add)
	for flag := range single {
		if !slices.Contains([]string{"--listen", "--token-file", "--shutdown-grace", "--path-prefix"}, flag) {
			add("sidecar args: unexpected %s", flag)
		}
	}
	return single
}

// checkTokenFile checks that --token-file is the token key of the Secret,
// mounted read-only.
func checkTokenFile(c *corev1.Container, ps corev1.PodSpec, file string, w want, add adder) {
	for _, m := range c.VolumeMounts {
		if m.Name != "token" {
			add("sidecar mounts %s", m.Name)
			continue
		}
		if !m.ReadOnly {
			add("token mount is not readOnly")
		}
		if file != m.MountPath+"/"+tokenKey || m.SubPath != "" {
			add("--token-file %q is not the token in the mount at %s", file, m.MountPath)
		}
		return
	}
	add("sidecar does not mount the token")
}

func checkEnv(c *corev1.Container, add adder) {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		if strings.HasPrefix(e.Name, "MESHLAUNCH_TOKEN") && e.Name != "MESHLAUNCH_TOKEN_FILE" {
			add("sidecar env %s: the secret belongs in the mounted file", e.Name)
		}
	}
	pod := env["POD_IP"]
	if pod.Value != "" || pod.ValueFrom == nil || pod.ValueFrom.FieldRef == nil || pod.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		add("sidecar env POD_IP %+v: want the downward API's status.podIP", pod)
	}
	lim, err := resource.ParseQuantity(strings.TrimSuffix(env["GOMEMLIMIT"].Value, "B"))
	if env["GOMEMLIMIT"].Value != goMemLimit || err != nil || lim.Cmp(*c.Resources.Limits.Memory()) >= 0 {
		add("sidecar env GOMEMLIMIT %q, want %q, below the memory limit %v", env["GOMEMLIMIT"].Value, goMemLimit, c.Resources.Limits.Memory())
	}
}

func checkPorts(c *corev1.Container, w want, add adder) {
	if p := findPort(c, "mesh"); p == nil || p.ContainerPort != w.meshPort || p.Protocol != corev1.ProtocolTCP {
		add("sidecar container port mesh %+v, want %d/TCP", p, w.meshPort)
	}
	for _, e := range w.exposes {
		num, proto, _ := strings.Cut(e, "/")
		p := findPort(c, proto+"-"+num)
		if p == nil || strconv.Itoa(int(p.ContainerPort)) != num || !strings.EqualFold(string(p.Protocol), proto) {
			add("sidecar container port for --expose %s: %+v", e, p)
		}
	}
	if len(c.Ports) != 1+len(w.exposes) {
		add("sidecar has %d container ports, want %d", len(c.Ports), 1+len(w.exposes))
	}
}

func findPort(c *corev1.Container, name string) *corev1.ContainerPort {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return &c.Ports[i]
		}
	}
	return nil
}

func checkProbes(c *corev1.Container, w want, add adder) {
	for _, pr := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/healthz", c.LivenessProbe}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			add("sidecar has no HTTP %s probe", pr.name)
			continue
		}
		g := pr.probe.HTTPGet
		if g.Path != pr.path || resolvePort(c, g.Port) != w.meshPort || (g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP) {
			add("sidecar %s probe %s %s %v, want HTTP %s on %d", pr.name, g.Scheme, g.Path, g.Port, pr.path, w.meshPort)
		}
	}
}

// resolvePort is the container port a probe's port names, or 0.
func resolvePort(c *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	if cp := findPort(c, p.StrVal); cp != nil {
		return cp.ContainerPort
	}
	return 0
}

func checkResources(c *corev1.Container, add adder) {
	r := c.Resources
	for _, q := range []struct {
		what string
		got  *resource.Quantity
		want string
	}{
		{"cpu request", r.Requests.Cpu(), "50m"},
		{"memory request", r.Requests.Memory(), "32Mi"},
		{"memory limit", r.Limits.Memory(), "256Mi"},
	} {
		if q.got.Cmp(resource.MustParse(q.want)) != 0 {
			add("sidecar %s %v, want %s", q.what, q.got, q.want)
		}
	}
}
