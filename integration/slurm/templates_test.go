package slurm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// The templates of deploy/interlink, which interLink's virtual kubelet
// executes with text/template.
const (
	shadowTemplate  = "../../deploy/interlink/shadow-pod.yaml" // Network.WstunnelTemplatePath
	preExecTemplate = "../../deploy/interlink/pre-exec.sh"     // Network.MeshScriptTemplatePath
)

// shadowData has the field names and types of the data interLink executes
// the shadow pod template with (WstunnelTemplateData in its
// pkg/virtualkubelet), except the fields of Kubernetes API types (local
// containers, volumes, labels), which the template does not use. A field
// the template names that interLink does not provide fails the render.
type shadowData struct {
	Name             string
	Namespace        string
	RandomPassword   string
	ExposedPorts     []portMapping
	WildcardDNS      string
	WGPrivateKey     string
	ClientPublicKey  string
	WGMTU            int
	KeepaliveSecs    int
	ClientPrivateKey string
}

// portMapping is interLink's PortMapping: one container port of the
// offloaded pod.
type portMapping struct {
	Port     int32
	Name     string
	Protocol string // "TCP" or "UDP"
}

// meshScriptData has the field names and types of interLink's
// MeshScriptTemplateData, the data of the mesh script template.
type meshScriptData struct {
	WGInterfaceName       string
	WSTunnelExecutableURL string
	WireguardGoURL        string
	WgToolURL             string
	Slirp4netnsURL        string
	WGConfig              string
	DNSServiceIP          string
	RandomPassword        string
	IngressEndpoint       string
	WGMTU                 int
	PodCIDRCluster        string
	ServiceCIDR           string
	UnshareMode           string
}

// render executes the template file at path with data, as interLink does
// (text/template, no extra functions).
func render(t *testing.T, path string, data any) string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New(filepath.Base(path)).Parse(string(text))
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		t.Fatalf("execute %s: %v", path, err)
	}
	return out.String()
}

func renderPreExec(t *testing.T, data meshScriptData) string {
	t.Helper()
	return render(t, preExecTemplate, data)
}

// shadowObjects are the shadow template's objects, decoded.
type shadowObjects struct {
	secret  *corev1.Secret
	deploy  *appsv1.Deployment
	svc     *corev1.Service
	ingress *networkingv1.Ingress // nil without WildcardDNS
}

// decodeShadow splits a rendered shadow template the way interLink does
// (at every "---", skipping empty parts) and decodes each part strictly
// (unknown or duplicate fields are errors) into its Kubernetes type.
func decodeShadow(t *testing.T, manifest string) shadowObjects {
	t.Helper()
	var o shadowObjects
	for i, part := range strings.Split(manifest, "---") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var meta struct{ Kind, APIVersion string }
		if err := yaml.Unmarshal([]byte(part), &meta); err != nil {
			t.Fatalf("part %d: %v\n%s", i, err, part)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Secret":
			o.secret = new(corev1.Secret)
			obj = o.secret
		case "apps/v1 Deployment":
			o.deploy = new(appsv1.Deployment)
			obj = o.deploy
		case "v1 Service":
			o.svc = new(corev1.Service)
			obj = o.svc
		case "networking.k8s.io/v1 Ingress":
			o.ingress = new(networkingv1.Ingress)
			obj = o.ingress
		default:
			t.Fatalf("part %d: unexpected %s %s (interLink applies Deployments, Services, Ingresses, ConfigMaps and Secrets)\n%s",
				i, meta.APIVersion, meta.Kind, part)
		}
		if err := yaml.UnmarshalStrict([]byte(part), obj); err != nil {
			t.Fatalf("part %d (%s): %v\n%s", i, meta.Kind, err, part)
		}
	}
	if o.secret == nil || o.deploy == nil || o.svc == nil {
		t.Fatalf("want a Secret, a Deployment and a Service, got %+v", o)
	}
	return o
}

// TestShadowPodTemplate renders deploy/interlink/shadow-pod.yaml with
// interLink's data and checks what the cluster admin is promised: a
// sidecar with no privileges, its secret from a Secret, the pod IP from
// the downward API, the offloaded pod's ports exposed, the label and
// annotation interLink relies on, and an Ingress for the wildcard name.
func TestShadowPodTemplate(t *testing.T) {
	data := shadowData{
		Name: "job-a-team1", Namespace: "team1-wstunnel", RandomPassword: "0123456789abcdef0123456789abcdef",
		ExposedPorts: []portMapping{{8888, "jupyter", "TCP"}, {5353, "", "UDP"}, {9000, "", ""}},
		WildcardDNS:  "hpc.example.org", WGPrivateKey: "unused", ClientPublicKey: "unused", WGMTU: 1280, KeepaliveSecs: 25,
	}
	o := decodeShadow(t, render(t, shadowTemplate, data))

	if got := o.secret.StringData["token"]; got != data.RandomPassword {
		t.Errorf("Secret token = %q, want RandomPassword %q", got, data.RandomPassword)
	}
	if o.secret.Name != o.deploy.Spec.Template.Spec.Volumes[0].Secret.SecretName {
		t.Errorf("the sidecar mounts Secret %q, the template makes %q",
			o.deploy.Spec.Template.Spec.Volumes[0].Secret.SecretName, o.secret.Name)
	}
	tmpl := o.deploy.Spec.Template
	if got := tmpl.Labels["app.kubernetes.io/component"]; got != data.Name {
		t.Errorf("pod label app.kubernetes.io/component = %q, want %q (interLink finds the shadow pod by it)", got, data.Name)
	}
	if got := tmpl.Annotations["interlink.eu/wstunnel-path-prefix"]; got != data.RandomPassword {
		t.Errorf("pod annotation interlink.eu/wstunnel-path-prefix = %q, want RandomPassword (interLink reuses it on retries)", got)
	}
	spec := tmpl.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("want one container, got %d (+%d init)", len(spec.Containers), len(spec.InitContainers))
	}
	ctr := spec.Containers[0]
	sc, psc := ctr.SecurityContext, spec.SecurityContext
	switch {
	case sc == nil || psc == nil:
		t.Fatal("missing security context")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop ALL and add nothing", sc.Capabilities)
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0:
		t.Error("not non-root")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem not read-only")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("hostPath volume %s (%s)", v.Name, v.HostPath.Path)
		}
	}
	if spec.HostNetwork || spec.HostPID {
		t.Error("host namespaces")
	}
	if !slices.Equal(ctr.Args, []string{"sidecar", "--listen=:28080",
		"--expose=8888/tcp", "--expose=5353/udp", "--expose=9000/tcp"}) {
		t.Errorf("sidecar args %q", ctr.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range ctr.Env {
		env[e.Name] = e
	}
	if e := env["POD_IP"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP is not the downward API's status.podIP: %+v", e)
	}
	if e := env["MESHLAUNCH_TOKEN_FILE"]; e.Value == "" || !strings.HasPrefix(e.Value, ctr.VolumeMounts[0].MountPath+"/") {
		t.Errorf("MESHLAUNCH_TOKEN_FILE %q is not in the Secret's mount %q", e.Value, ctr.VolumeMounts[0].MountPath)
	}
	if _, ok := env["MESHLAUNCH_TOKEN"]; ok {
		t.Error("the secret is in the environment")
	}
	host := data.Name + "-" + data.Namespace + "." + data.WildcardDNS // interLink's IngressEndpoint
	if o.ingress == nil {
		t.Fatal("no Ingress with WildcardDNS set")
	}
	if r := o.ingress.Spec.Rules; len(r) != 1 || r[0].Host != host || r[0].HTTP.Paths[0].Backend.Service.Name != o.svc.Name {
		t.Errorf("Ingress rules %+v, want host %s to Service %s", r, host, o.svc.Name)
	}
	if tls := o.ingress.Spec.TLS; len(tls) != 1 || !slices.Equal(tls[0].Hosts, []string{host}) {
		t.Errorf("Ingress TLS %+v, want host %s", tls, host)
	}

	data.WildcardDNS = ""
	if o := decodeShadow(t, render(t, shadowTemplate, data)); o.ingress != nil {
		t.Error("an Ingress without WildcardDNS")
	}
}

// TestPreExecTemplate runs deploy/interlink/pre-exec.sh, rendered, at the
// top of a job.slurm-shaped script with a stand-in meshlaunch that records
// its arguments and the secret's file, then runs the job as the launcher
// would (with MESHLAUNCH_POD_IP set). No SLURM, no root.
func TestPreExecTemplate(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	data := meshScriptData{
		RandomPassword: "0123456789abcdef0123456789abcdef", IngressEndpoint: "job-a-team1-team1-wstunnel.hpc.example.org",
		ServiceCIDR: "10.96.0.0/12", PodCIDRCluster: "10.244.0.0/16", DNSServiceIP: "10.96.0.10",
		WGMTU: 1280, UnshareMode: "auto", WGInterfaceName: "wg0123456789ab",
	}
	preExec := renderPreExec(t, data)
	for _, banned := range []string{"curl", "wget", "sleep", "-k ", "slirp4netns", "wireguard", "10.7.0.", "iptables"} {
		if strings.Contains(strings.ToLower(stripComments(preExec)), banned) {
			t.Errorf("the rendered pre-exec uses %q", banned)
		}
	}
	if out, err := exec.Command(bash, "-n", "-c", preExec).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}

	dir := t.TempDir()
	rec, bin, tmp := filepath.Join(dir, "rec"), filepath.Join(dir, "bin"), filepath.Join(dir, "tmp")
	for _, d := range []string{rec, bin, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The stand-in records its argv (one per line), the secret file's mode
	// and contents, then execs what follows "--" inside the "mesh".
	fake := `#!/bin/sh
printf '%s\n' "$@" >"$REC/args"
tok=
prev=
for a in "$@"; do
	[ "$prev" = --token-file ] && tok=$a
	prev=$a
done
stat -c %a "$tok" >"$REC/mode"
cat "$tok" >"$REC/token"
while [ "$1" != -- ]; do shift; done
shift
MESHLAUNCH_POD_IP=10.244.1.5 exec "$@"
`
	if err := os.WriteFile(filepath.Join(bin, "meshlaunch"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	// As interLink's SLURM plugin lays out job.slurm: the pre-exec, then
	// the line that runs job.sh (here inline). Runs counts the passes.
	job := filepath.Join(dir, "job.slurm")
	script := "#!/bin/bash\n#SBATCH --job-name=x\necho pass >>\"$REC/passes\"\n" + preExec +
		"echo \"$MESHLAUNCH_POD_IP\" >\"$REC/inside\"\nexit 5\n"
	if err := os.WriteFile(job, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(path string) (int, string) {
		cmd := exec.Command(bash, job)
		cmd.Env = []string{"PATH=" + path, "REC=" + rec, "TMPDIR=" + tmp}
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil {
			t.Fatalf("run job.slurm: %v", err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}

	code, out := run(bin + ":/usr/bin:/bin")
	if code != 5 {
		t.Errorf("job.slurm exited %d, want the job's 5\n%s", code, out)
	}
	wantArgs := []string{"run", "--server", "wss://" + data.IngressEndpoint, "--token-file", "TOKEN",
		"--route", data.ServiceCIDR, "--route", data.PodCIDRCluster, "--", bash, job}
	args := strings.Split(strings.TrimSuffix(readFile(filepath.Join(rec, "args")), "\n"), "\n")
	if len(args) == len(wantArgs) {
		args[4] = "TOKEN" // a temporary path
	}
	if !slices.Equal(args, wantArgs) {
		t.Errorf("meshlaunch argv %q, want %q", args, wantArgs)
	}
	if got := strings.TrimSpace(readFile(filepath.Join(rec, "mode"))); got != "600" {
		t.Errorf("secret file mode %s, want 600", got)
	}
	if got := readFile(filepath.Join(rec, "token")); got != data.RandomPassword+"\n" {
		t.Errorf("secret file holds %q, want RandomPassword", got)
	}
	if got := strings.TrimSpace(readFile(filepath.Join(rec, "inside"))); got != "10.244.1.5" {
		t.Errorf("the job ran with MESHLAUNCH_POD_IP %q, want it inside the launcher", got)
	}
	if got := strings.Count(readFile(filepath.Join(rec, "passes")), "pass"); got != 2 {
		t.Errorf("job.slurm ran %d times, want 2 (outside, then inside the launcher)", got)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	// Without meshlaunch on the node, the job stops at once and says why.
	os.Remove(filepath.Join(rec, "inside"))
	code, out = run("/usr/bin:/bin")
	if code != 127 || !strings.Contains(out, "meshlaunch is not installed") {
		t.Errorf("without meshlaunch: exit %d, %q; want 127 and a message", code, out)
	}
	if _, err := os.Stat(filepath.Join(rec, "inside")); err == nil {
		t.Error("the job ran without meshlaunch")
	}
}

// stripComments drops shell comment lines, which may name what the
// script no longer does.
func stripComments(script string) string {
	var b strings.Builder
	for line := range strings.Lines(script) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			fmt.Fprint(&b, line)
		}
	}
	return b.String()
}
