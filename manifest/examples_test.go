package manifest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the committed examples in deploy/kubernetes/")

const exampleDir = "../deploy/kubernetes"

// placeholderToken stands in for the secret in the committed examples. It
// is shorter than identity.MinSecretLen, so a sidecar given it refuses to
// start: applying an example unchanged cannot run with a published secret.
const placeholderToken = "CHANGE-ME"

// examples are the committed manifests and the options they render.
var examples = []struct {
	file string
	opts Options
	want want
}{
	{"meshlaunch.yaml", exampleOptions(false), exampleWant(false)},
	{"meshlaunch-native-sidecar.yaml", exampleOptions(true), exampleWant(true)},
}

func exampleOptions(native bool) Options {
	return Options{Name: "pod-a", Host: "mesh.example.org", Ports: []string{"9000"},
		Routes: []string{"10.96.0.0/12", "10.244.0.0/16"}, NativeSidecar: native}
}

func exampleWant(native bool) want {
	w := base()
	w.token, w.native = placeholderToken, native
	w.exposes, w.routes = []string{"9000/tcp"}, []string{"10.96.0.0/12", "10.244.0.0/16"}
	return w
}

func renderExample(opts Options) ([]byte, error) {
	s, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	s.Token = placeholderToken
	var buf bytes.Buffer
	err = render(&buf, s, true)
	return buf.Bytes(), err
}

// TestCommittedExamples keeps deploy/kubernetes/*.yaml equal to what Render
// writes (with the placeholder secret) and checks them like Render's
// output. `go generate ./manifest/` rewrites them.
func TestCommittedExamples(t *testing.T) {
	var want []string
	for _, ex := range examples {
		want = append(want, ex.file)
		t.Run(ex.file, func(t *testing.T) {
			path := filepath.Join(exampleDir, ex.file)
			rendered, err := renderExample(ex.opts)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(path, rendered, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			committed, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run `go generate ./manifest/`)", err)
			}
			if !bytes.Equal(committed, rendered) {
				t.Errorf("%s differs from Render's output; run `go generate ./manifest/`\n%s", path, firstDiff(committed, rendered))
			}
			objs, err := decodeStream(committed)
			if err != nil {
				t.Fatalf("decode %s: %v", path, err)
			}
			for _, p := range problems(objs, ex.want) {
				t.Error(p)
			}
			if !bytes.Contains(committed, []byte("This is an example: its secret is a placeholder")) {
				t.Error("the example does not say that its secret is a placeholder")
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(exampleDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(want, filepath.Base(f)) {
			t.Errorf("%s is not rendered by any example; add it to examples or remove it", f)
		}
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n committed: %q\n  rendered: %q", i+1, x, y)
		}
	}
	return "(equal)"
}

// TestContainerfile checks that the image runs meshlaunch as the user the
// manifest's securityContext names, with nothing but the binary.
func TestContainerfile(t *testing.T) {
	data, err := os.ReadFile("../deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var instr []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr = append(instr, line)
	}
	has := func(want string) {
		t.Helper()
		if !slices.Contains(instr, want) {
			t.Errorf("deploy/Containerfile lacks %q", want)
		}
	}
	if len(instr) == 0 || instr[0] != "FROM scratch" {
		t.Errorf("deploy/Containerfile does not start FROM scratch")
	}
	has(fmt.Sprintf("USER %d:%d", runAs, runAs))
	has(`ENTRYPOINT ["/meshlaunch"]`)
	has(`CMD ["sidecar"]`)
	has("COPY bin/meshlaunch /meshlaunch")
	for _, in := range instr {
		if strings.HasPrefix(in, "RUN ") || strings.HasPrefix(in, "FROM ") && in != "FROM scratch" {
			t.Errorf("deploy/Containerfile: %q (no shell, no base image)", in)
		}
	}
}
