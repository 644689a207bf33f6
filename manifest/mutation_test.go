package manifest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func caseNamed(t *testing.T, name string) renderCase {
	for _, c := range renderCases() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no render case %q", name)
	return renderCase{}
}

// TestChecksCatchBreakage breaks one setting at a time in a correct
// manifest and requires problems to notice, so that a check which passes
// vacuously (a typo in a field path, a condition that is always true) is
// itself a test failure.
func TestChecksCatchBreakage(t *testing.T) {
	plainCase := caseNamed(t, "low port")
	nativeCase := caseNamed(t, "native sidecar on a low mesh port with everything")
	plain, _ := renderObjects(t, plainCase.opts)
	native, _ := renderObjects(t, nativeCase.opts)
	if p := problems(plain, plainCase.want); len(p) > 0 {
		t.Fatalf("the unbroken manifest has problems: %v", p)
	}

	mesh := func(o objects) *corev1.Container {
		ps := &o.deploy.Spec.Template.Spec
		if len(ps.InitContainers) > 0 {
			return &ps.InitContainers[0]
		}
		return &ps.Containers[0]
	}
	pod := func(o objects) *corev1.PodSpec { return &o.deploy.Spec.Template.Spec }
	sc := func(o objects) *corev1.SecurityContext { return mesh(o).SecurityContext }
	pause := func(o objects) *corev1.SecurityContext { return pod(o).Containers[0].SecurityContext }
	ptr := func(b bool) *bool { return &b }
	i64 := func(v int64) *int64 { return &v }
	setArg := func(o objects, flag, value string) {
		args := mesh(o).Args
		for i := range args {
			if args[i] == flag {
				args[i+1] = value
				return
			}
		}
		t.Fatalf("no %s in %q", flag, args)
	}
	dropArg := func(o objects, flag string) {
		c := mesh(o)
		for i := range c.Args {
			if c.Args[i] == flag {
				c.Args = append(c.Args[:i:i], c.Args[i+2:]...)
				return
			}
		}
		t.Fatalf("no %s in %q", flag, c.Args)
	}
	ann := func(o objects) map[string]string { return o.ingress.Annotations }

	for _, m := range []struct {
		name   string
		native bool // break the native-sidecar manifest instead of the plain one
		break_ func(o objects)
	}{
		// Security, on the sidecar and on pause.
		{"capabilities not dropped", false, func(o objects) { sc(o).Capabilities.Drop = nil }},
		{"NET_ADMIN added", false, func(o objects) { sc(o).Capabilities.Add = []corev1.Capability{"NET_ADMIN"} }},
		{"privileged", false, func(o objects) { sc(o).Privileged = ptr(true) }},
		{"privilege escalation", false, func(o objects) { sc(o).AllowPrivilegeEscalation = ptr(true) }},
		{"privilege escalation unset", false, func(o objects) { sc(o).AllowPrivilegeEscalation = nil }},
		{"runAsNonRoot false", false, func(o objects) { sc(o).RunAsNonRoot = ptr(false) }},
		{"root user", false, func(o objects) { sc(o).RunAsUser = i64(0) }},
		{"other group", false, func(o objects) { sc(o).RunAsGroup = i64(0) }},
		{"writable root", false, func(o objects) { sc(o).ReadOnlyRootFilesystem = ptr(false) }},
		{"seccomp unconfined", false, func(o objects) {
			sc(o).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}},
		{"no container securityContext", false, func(o objects) { mesh(o).SecurityContext = nil }},
		{"host port", false, func(o objects) { mesh(o).Ports[0].HostPort = 8080 }},
		{"pause privileged", true, func(o objects) { pause(o).Privileged = ptr(true) }},
		{"pause writable root", true, func(o objects) { pause(o).ReadOnlyRootFilesystem = nil }},
		{"pause keeps capabilities", true, func(o objects) { pause(o).Capabilities = nil }},
		{"pause without memory limit", true, func(o objects) { pod(o).Containers[0].Resources.Limits = nil }},
		{"pod runs as root", false, func(o objects) { pod(o).SecurityContext.RunAsUser = i64(0) }},
		{"pod without fsGroup", false, func(o objects) { pod(o).SecurityContext.FSGroup = nil }},
		{"pod seccomp unset", false, func(o objects) { pod(o).SecurityContext.SeccompProfile = nil }},
		{"host network", false, func(o objects) { pod(o).HostNetwork = true }},
		{"service account token", false, func(o objects) { pod(o).AutomountServiceAccountToken = nil }},
		{"service links", false, func(o objects) { pod(o).EnableServiceLinks = ptr(true) }},
		{"sysctl missing for a low port", false, func(o objects) { pod(o).SecurityContext.Sysctls = nil }},
		{"sysctl 1024 for a low port", false, func(o objects) { pod(o).SecurityContext.Sysctls[0].Value = "1024" }},
		{"extra sysctl", false, func(o objects) {
			s := pod(o).SecurityContext
			s.Sysctls = append(s.Sysctls, corev1.Sysctl{Name: "net.core.somaxconn", Value: "1024"})
		}},
		// The sidecar's command line and environment.
		{"an --expose dropped", false, func(o objects) { dropArg(o, "--expose") }},
		{"an --expose changed", false, func(o objects) { setArg(o, "--expose", "81/tcp") }},
		{"a --route dropped", true, func(o objects) { dropArg(o, "--route") }},
		{"--listen elsewhere", false, func(o objects) { setArg(o, "--listen", ":9999") }},
		{"--path-prefix dropped", true, func(o objects) { dropArg(o, "--path-prefix") }},
		{"--token-file elsewhere", false, func(o objects) { setArg(o, "--token-file", "/token") }},
		{"--shutdown-grace above the termination grace", false, func(o objects) { setArg(o, "--shutdown-grace", "40s") }},
		{"not the sidecar command", false, func(o objects) { mesh(o).Args[0] = "tunnel" }},
		{"a shell command", false, func(o objects) { mesh(o).Command = []string{"/bin/sh"} }},
		{"other image", false, func(o objects) { mesh(o).Image = "busybox" }},
		{"POD_IP from the host", false, func(o objects) { mesh(o).Env[0].ValueFrom.FieldRef.FieldPath = "status.hostIP" }},
		{"POD_IP missing", false, func(o objects) { mesh(o).Env = mesh(o).Env[1:] }},
		{"GOMEMLIMIT missing", false, func(o objects) { mesh(o).Env = mesh(o).Env[:1] }},
		{"GOMEMLIMIT above the limit", false, func(o objects) { mesh(o).Env[1].Value = "300MiB" }},
		{"secret in the environment", false, func(o objects) {
			mesh(o).Env = append(mesh(o).Env, corev1.EnvVar{Name: "MESHLAUNCH_TOKEN", Value: "x"})
		}},
		{"token mount writable", false, func(o objects) { mesh(o).VolumeMounts[0].ReadOnly = false }},
		{"token not mounted", false, func(o objects) { mesh(o).VolumeMounts = nil }},
		{"token volume world-readable", false, func(o objects) {
			m := int32(0o644)
			pod(o).Volumes[0].Secret.DefaultMode = &m
		}},
		{"token volume from another Secret", false, func(o objects) { pod(o).Volumes[0].Secret.SecretName = "other" }},
		// Probes, ports, resources, termination.
		{"readiness on /healthz", false, func(o objects) { mesh(o).ReadinessProbe.HTTPGet.Path = "/healthz" }},
		{"readiness on another port", false, func(o objects) { mesh(o).ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9999) }},
		{"no liveness probe", false, func(o objects) { mesh(o).LivenessProbe = nil }},
		{"no startup probe on the native sidecar", true, func(o objects) { mesh(o).StartupProbe = nil }},
		{"mesh container port moved", false, func(o objects) { mesh(o).Ports[0].ContainerPort = 8081 }},
		{"exposed container port missing", false, func(o objects) { mesh(o).Ports = mesh(o).Ports[:1] }},
		{"cpu request", false, func(o objects) { mesh(o).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1") }},
		{"memory limit", false, func(o objects) { delete(mesh(o).Resources.Limits, corev1.ResourceMemory) }},
		{"termination grace 30", false, func(o objects) { v := int64(30); pod(o).TerminationGracePeriodSeconds = &v }},
		{"two replicas", false, func(o objects) { v := int32(2); o.deploy.Spec.Replicas = &v }},
		{"selector misses the pod", false, func(o objects) { o.deploy.Spec.Selector.MatchLabels["x"] = "y" }},
		{"native sidecar restarts never", true, func(o objects) { mesh(o).RestartPolicy = nil }},
		{"native sidecar as a main container", true, func(o objects) {
			pod(o).Containers = append(pod(o).Containers, pod(o).InitContainers[0])
			pod(o).InitContainers = nil
		}},
		// Secret, Service, Ingress.
		{"secret in another namespace", false, func(o objects) { o.secret.Namespace = "other" }},
		{"short token", false, func(o objects) { o.secret.StringData[tokenKey] = "short" }},
		{"service without an exposed port", false, func(o objects) { o.svc.Spec.Ports = o.svc.Spec.Ports[:1] }},
		{"service port to the wrong target", false, func(o objects) { o.svc.Spec.Ports[1].TargetPort = intstr.FromString("mesh") }},
		{"service UDP as TCP", false, func(o objects) { o.svc.Spec.Ports[2].Protocol = corev1.ProtocolTCP }},
		{"NodePort service", false, func(o objects) { o.svc.Spec.Type = corev1.ServiceTypeNodePort }},
		{"service selects nothing", false, func(o objects) { o.svc.Spec.Selector = map[string]string{"app": "x"} }},
		{"read timeout 60", false, func(o objects) { ann(o)["nginx.ingress.kubernetes.io/proxy-read-timeout"] = "60" }},
		{"send timeout missing", false, func(o objects) { delete(ann(o), "nginx.ingress.kubernetes.io/proxy-send-timeout") }},
		{"HTTP/1.0", false, func(o objects) { ann(o)["nginx.ingress.kubernetes.io/proxy-http-version"] = "1.0" }},
		{"HTTPS backend", false, func(o objects) { ann(o)["nginx.ingress.kubernetes.io/backend-protocol"] = "HTTPS" }},
		{"issuer missing", true, func(o objects) { delete(ann(o), "cert-manager.io/cluster-issuer") }},
		{"issuer without TLS asked", false, func(o objects) { ann(o)["cert-manager.io/cluster-issuer"] = "ca" }},
		{"TLS missing", true, func(o objects) { o.ingress.Spec.TLS = nil }},
		{"TLS for another host", true, func(o objects) { o.ingress.Spec.TLS[0].Hosts = []string{"other.example.org"} }},
		{"other ingress class", false, func(o objects) { c := "traefik"; o.ingress.Spec.IngressClassName = &c }},
		{"ingress path without the prefix", true, func(o objects) { o.ingress.Spec.Rules[0].HTTP.Paths[0].Path = "/" }},
		{"ingress path exact", false, func(o objects) {
			e := networkingv1.PathTypeExact
			o.ingress.Spec.Rules[0].HTTP.Paths[0].PathType = &e
		}},
		{"ingress to an exposed port", false, func(o objects) {
			o.ingress.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port = networkingv1.ServiceBackendPort{Name: "tcp-80"}
		}},
		{"ingress for another host", false, func(o objects) { o.ingress.Spec.Rules[0].Host = "other.example.org" }},
	} {
		t.Run(m.name, func(t *testing.T) {
			o, w := plain.deepCopy(), plainCase.want
			if m.native {
				o, w = native.deepCopy(), nativeCase.want
			}
			m.break_(o)
			if p := problems(o, w); len(p) == 0 {
				t.Error("problems found nothing wrong")
			} else {
				t.Log(p)
			}
		})
	}
}
