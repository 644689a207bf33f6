package manifest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/meshapi"
)

// TestSidecarRunsRenderedContainer builds meshlaunch and runs the rendered
// sidecar container as a process: its arguments and environment, the
// token file where the Secret would be mounted. The sidecar must become
// ready, serve the probes, serve the mesh under the Ingress path, listen
// on the exposed ports, and exit 0 on SIGTERM within the pod's grace.
func TestSidecarRunsRenderedContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs meshlaunch")
	}
	bin := filepath.Join(t.TempDir(), "meshlaunch")
	build := exec.Command("go", "build", "-o", bin, "../cmd/meshlaunch")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	token, err := identity.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	meshPort, tcpPort, udpPort := freePort(t, "tcp"), freePort(t, "tcp"), freePort(t, "udp")
	objs, _ := renderObjects(t, Options{Name: "pod-a", Host: "mesh.example.org", Token: token,
		MeshPort: meshPort, PathPrefix: "/mesh/pod-a", Routes: []string{"10.96.0.0/12"},
		Ports: []string{fmt.Sprint(tcpPort), fmt.Sprintf("%d/udp", udpPort)}})
	c := objs.deploy.Spec.Template.Spec.Containers[0]

	cmd := exec.Command(bin, containerArgs(t, c, token)...)
	cmd.Env = containerEnv(t, c)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when waitErr is set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", stderr.String())
		}
	})

	base := fmt.Sprintf("http://127.0.0.1:%d", meshPort)
	waitReady(t, base+c.ReadinessProbe.HTTPGet.Path, exited, &waitErr)
	cred := mustCredential(t, token)
	for _, chk := range []struct {
		path, auth string
		want       int
	}{
		{c.LivenessProbe.HTTPGet.Path, "", http.StatusOK},
		{"/mesh/pod-a" + meshapi.StatusPath, cred, http.StatusOK},
		{"/mesh/pod-a" + meshapi.StatusPath, "", http.StatusUnauthorized},
		{meshapi.StatusPath, cred, http.StatusNotFound}, // only under the Ingress's path
	} {
		if got := get(t, base+chk.path, chk.auth); got != chk.want {
			t.Errorf("GET %s: %d, want %d", chk.path, got, chk.want)
		}
	}
	// A port is exposed if this process cannot bind it. (Connecting would
	// race with the sidecar resetting a connection that has no job.)
	if ln, err := net.Listen("tcp4", fmt.Sprintf(":%d", tcpPort)); err == nil {
		ln.Close()
		t.Errorf("exposed port %d/tcp is not bound by the sidecar", tcpPort)
	}
	if pc, err := net.ListenPacket("udp4", fmt.Sprintf(":%d", udpPort)); err == nil {
		pc.Close()
		t.Errorf("exposed port %d/udp is not bound by the sidecar", udpPort)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(*objs.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("sidecar exited with %v after SIGTERM, want 0", waitErr)
		}
	case <-time.After(grace):
		t.Fatalf("sidecar still running %v after SIGTERM", grace)
	}
}

// containerArgs are c's arguments with the token file where this test
// wrote it, at the Secret volume's mode.
func containerArgs(t *testing.T, c corev1.Container, token string) []string {
	args := append([]string(nil), c.Args...)
	file := filepath.Join(t.TempDir(), tokenKey)
	if err := os.WriteFile(file, []byte(token), 0o440); err != nil {
		t.Fatal(err)
	}
	for i := range args {
		if args[i] == "--token-file" {
			args[i+1] = file
		}
	}
	return args
}

// containerEnv is c's environment with the downward API filled in, and
// nothing from this process's environment.
func containerEnv(t *testing.T, c corev1.Container) []string {
	var env []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env = append(env, e.Name+"=10.244.1.5")
		default:
			t.Fatalf("env %s: no stand-in for %+v", e.Name, e.ValueFrom)
		}
	}
	return env
}

func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().(*net.UDPAddr).Port
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitReady(t *testing.T, url string, exited <-chan struct{}, waitErr *error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("sidecar exited before it was ready: %v", *waitErr)
		default:
		}
		if get(t, url, "") == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not ready after 15s", url)
}

// get returns the status of GET url, or 0 if the request failed.
func get(t *testing.T, url, bearer string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0 // not listening yet
	}
	resp.Body.Close()
	return resp.StatusCode
}

func mustCredential(t *testing.T, token string) string {
	t.Helper()
	id, err := identity.Derive(token)
	if err != nil {
		t.Fatal(err)
	}
	return id.Credential
}
