package manifest

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Checks of the Service and the Ingress against the pod and each other.

func checkService(s *corev1.Service, d *appsv1.Deployment, w want, add adder) {
	checkMeta("Service", s.Name, s.Namespace, w, add)
	if s.Name != w.name {
		add("Service name %q, want %q", s.Name, w.name)
	}
	if s.Spec.Type != corev1.ServiceTypeClusterIP {
		add("Service type %q, want ClusterIP", s.Spec.Type)
	}
	if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		add("Service selector %v does not select the pod %v", s.Spec.Selector, d.Spec.Template.Labels)
	}
	var mesh *corev1.Container
	for _, c := range allContainers(d.Spec.Template.Spec) {
		if c.Name == "meshlaunch" {
			mesh = &c
		}
	}
	if mesh == nil {
		return // reported with the Deployment
	}
	wantPorts := map[string]string{"mesh": fmt.Sprintf("%d/TCP", w.meshPort)}
	for _, e := range w.exposes {
		num, proto, _ := strings.Cut(e, "/")
		wantPorts[proto+"-"+num] = num + "/" + strings.ToUpper(proto)
	}
	for _, p := range s.Spec.Ports {
		got := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		target := resolvePort(mesh, p.TargetPort)
		if wantPorts[p.Name] != got || fmt.Sprintf("%d/%s", target, p.Protocol) != got {
			add("Service port %s is %s to %v (container port %d), want %q", p.Name, got, p.TargetPort, target, wantPorts[p.Name])
		}
		delete(wantPorts, p.Name)
	}
	for name, p := range wantPorts {
		add("Service has no port %s (%s)", name, p)
	}
}

func checkIngress(in *networkingv1.Ingress, s *corev1.Service, w want, add adder) {
	checkMeta("Ingress", in.Name, in.Namespace, w, add)
	if in.Spec.IngressClassName == nil || *in.Spec.IngressClassName != "nginx" {
		add("Ingress class %v, want nginx", deref(in.Spec.IngressClassName))
	}
	wantAnn := map[string]string{
		"nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
		"nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
		"nginx.ingress.kubernetes.io/proxy-http-version": "1.1",
		"nginx.ingress.kubernetes.io/backend-protocol":   "HTTP",
		"nginx.ingress.kubernetes.io/proxy-buffer-size":  "64k",
	}
	if w.issuer != "" {
		wantAnn["cert-manager.io/cluster-issuer"] = w.issuer
	}
	for k, v := range in.Annotations {
		if wantAnn[k] != v {
			add("Ingress annotation %s: %q, want %q", k, v, wantAnn[k])
		}
	}
	for k, v := range wantAnn {
		if _, ok := in.Annotations[k]; !ok {
			add("Ingress lacks annotation %s: %q", k, v)
		}
	}
	checkIngressTLS(in, w, add)
	if len(in.Spec.Rules) != 1 || in.Spec.Rules[0].Host != w.host || in.Spec.Rules[0].HTTP == nil ||
		len(in.Spec.Rules[0].HTTP.Paths) != 1 {
		add("Ingress rules %+v: want one rule for %s with one path", in.Spec.Rules, w.host)
		return
	}
	path := in.Spec.Rules[0].HTTP.Paths[0]
	if path.Path != w.ingressPath || path.PathType == nil || *path.PathType != networkingv1.PathTypePrefix {
		add("Ingress path %q type %v, want Prefix %q", path.Path, deref(path.PathType), w.ingressPath)
	}
	if (path.Path == "/") != (w.prefixArg == "") || (w.prefixArg != "" && path.Path != w.prefixArg) {
		add("Ingress path %q and the sidecar's --path-prefix %q disagree", path.Path, w.prefixArg)
	}
	b := path.Backend.Service
	if b == nil || b.Name != s.Name || servicePort(s, b.Port) != w.meshPort {
		add("Ingress backend %+v, want Service %s port %d", path.Backend, s.Name, w.meshPort)
	}
}

func checkIngressTLS(in *networkingv1.Ingress, w want, add adder) {
	if w.tlsSecret == "" {
		if len(in.Spec.TLS) != 0 {
			add("Ingress has TLS %+v, want none", in.Spec.TLS)
		}
		return
	}
	if len(in.Spec.TLS) != 1 || in.Spec.TLS[0].SecretName != w.tlsSecret || !slices.Equal(in.Spec.TLS[0].Hosts, []string{w.host}) {
		add("Ingress TLS %+v, want secret %s for %s", in.Spec.TLS, w.tlsSecret, w.host)
	}
}

// servicePort is the port number a backend names, or 0.
func servicePort(s *corev1.Service, p networkingv1.ServiceBackendPort) int32 {
	for _, sp := range s.Spec.Ports {
		if (p.Name != "" && sp.Name == p.Name) || (p.Name == "" && sp.Port == p.Number) {
			return sp.Port
		}
	}
	return 0
}
