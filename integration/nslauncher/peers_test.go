package nslauncher

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// TestExplicitPeersShareOneSidecar: a sidecar with its own key and two
// --peer entries serves two launchers at once, each with its own key
// (--private-key-file): each job gets its own address in the mesh and
// reaches the Service by name, before and after the other joined (their
// sessions do not replace each other). A launcher without a key, and one
// whose key the sidecar does not list, fail at once with a message that
// says what to do.
func TestExplicitPeersShareOneSidecar(t *testing.T) {
	t.Parallel()
	c := &cluster{nstest.NewMeshCluster(t, nstest.MeshOpts{Meshlaunch: meshlaunchBin, Roles: "nstest-roles", NoSidecar: true})}
	sidecarKey := writeKey(t, c.Dir, "sidecar.key")
	keyA, keyB, stranger := writeKey(t, c.Dir, "a.key"), writeKey(t, c.Dir, "b.key"), writeKey(t, c.Dir, "stranger.key")
	const addrA, addrB = nstest.PodIP, "10.244.1.77"
	c.Sidecar = c.Topo.Start(t, c.Topo.Pod, nstest.ProcOpts{User: nobody}, c.SidecarArgv(
		"--private-key-file", sidecarKey.path,
		"--peer", keyA.pub+"="+addrA, "--peer", keyB.pub+"="+addrB)...)
	c.WaitReady(t, c.Sidecar, 15*time.Second)

	// Each job shows its address, fetches the Service, waits until the
	// other job has fetched it too, and fetches it again.
	job := func(me, other string) []string {
		return []string{"sh", "-c", `ip -o -4 addr show dev ml0 | awk '{print "addr\t0\t" $4}'
out=$(curl -sS --connect-timeout 3 --max-time 5 http://web/ 2>&1); printf 'first\t%s\t%s\n' $? "$out"
touch "$1/` + me + `"; i=0; while [ ! -e "$1/` + other + `" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
out=$(curl -sS --connect-timeout 3 --max-time 5 http://web/ 2>&1); printf 'second\t%s\t%s\n' $? "$out"`, "sh", c.Dir}
	}
	if err := os.Chmod(c.Dir, 0o777); err != nil { // the jobs (nobody) leave their marks there
		t.Fatal(err)
	}
	type out struct {
		stdout, stderr string
		code           int
	}
	var wg sync.WaitGroup
	var a, b out
	wg.Go(func() {
		a.stdout, a.stderr, a.code = c.run(t, launch{flags: []string{"--private-key-file", keyA.path}}, job("a.done", "b.done")...)
	})
	wg.Go(func() {
		b.stdout, b.stderr, b.code = c.run(t, launch{flags: []string{"--private-key-file", keyB.path}}, job("b.done", "a.done")...)
	})
	wg.Wait()
	t.Logf("job A:\n%s\njob B:\n%s", a.stdout, b.stdout)
	for _, j := range []struct {
		name, addr string
		o          out
	}{{"A", addrA, a}, {"B", addrB, b}} {
		if j.o.code != 0 {
			t.Errorf("launcher %s exited %d\nstdout:\n%s\nstderr:\n%s", j.name, j.o.code, j.o.stdout, j.o.stderr)
			continue
		}
		res := parseChecks(j.o.stdout)
		if got, ok := wantOK(t, res, "addr"); ok && got != j.addr+"/32" {
			t.Errorf("job %s has address %q in the mesh, want %s/32 (its --peer address)", j.name, got, j.addr)
		}
		wantClient(t, res, "first", nstest.PodIP)
		wantClient(t, res, "second", nstest.PodIP)
	}

	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"no key", nil, "serves explicit peers (--peer): run with --private-key-file"},
		{"unlisted key", []string{"--private-key-file", stranger.path}, "does not list this job's public key " + stranger.pub},
	} {
		_, stderr, code := c.run(t, launch{flags: tc.flags}, "true")
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: launcher exited %d with %q; want a failure saying %q", tc.name, code, stderr, tc.want)
		}
	}
}

type keyFile struct{ path, pub string }

// writeKey writes a new WireGuard private key into dir, readable by the
// sidecar and the launchers (nobody).
func writeKey(t *testing.T, dir, name string) keyFile {
	t.Helper()
	k, err := identity.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(k.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return keyFile{path: path, pub: k.Public().String()}
}
