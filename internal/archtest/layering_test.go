// Package archtest enforces the module's layering (docs/design.md,
// "Architecture"): data flows one way through layers that know nothing of
// the layers above them, and gVisor stays inside netstack.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/meshlaunch/meshlaunch"

// layerRule forbids the packages of one low layer, and every module package
// they import directly or indirectly, to import the listed directories.
type layerRule struct {
	from      string   // directory of the low layer, relative to the module
	forbidden []string // directories it must never reach
}

var layerRules = []layerRule{
	// wsproxy and netstack meet only at wireguard-go's conn.Bind and
	// tun.Device; sidecar and launcher compose them, cmd wires flags.
	{from: "netstack", forbidden: []string{"sidecar", "launcher", "cmd", "wsproxy"}},
	{from: "wsproxy", forbidden: []string{"sidecar", "launcher", "cmd", "netstack"}},
	{from: "identity", forbidden: []string{"sidecar", "launcher", "cmd", "netstack", "wsproxy"}},
	// The tunnel mode needs no WireGuard and no second TCP stack.
	{from: "tunnel", forbidden: []string{"sidecar", "launcher", "cmd", "netstack"}},
	{from: "policy", forbidden: []string{"sidecar", "launcher", "cmd", "netstack", "wsproxy"}},
	{from: "hostnat", forbidden: []string{"sidecar", "launcher", "cmd"}},
}

// gvisorHome is the only directory whose packages may import gVisor.
const gvisorHome = "netstack"

const gvisor = "gvisor.dev/gvisor"

// pkg is a package of the module and its direct, non-test imports.
type pkg struct {
	ImportPath string
	Imports    []string
}

// under reports whether import path p is the package dir of the module or
// below it ("netstackx" is not under "netstack").
func under(p, dir string) bool {
	d := module + "/" + dir
	return p == d || strings.HasPrefix(p, d+"/")
}

// rel shortens a module import path for messages.
func rel(p string) string { return strings.TrimPrefix(p, module+"/") }

// violations returns, sorted, every layering rule that pkgs break.
func violations(pkgs []pkg) []string {
	imports := make(map[string][]string, len(pkgs))
	for _, p := range pkgs {
		imports[p.ImportPath] = p.Imports
	}
	var out []string
	for _, p := range pkgs {
		for _, r := range layerRules {
			if under(p.ImportPath, r.from) {
				out = append(out, reachForbidden(p.ImportPath, r, imports)...)
			}
		}
		if under(p.ImportPath, gvisorHome) {
			continue
		}
		for _, imp := range p.Imports {
			if imp == gvisor || strings.HasPrefix(imp, gvisor+"/") {
				out = append(out, fmt.Sprintf("%s imports %s: only %s/ may import gVisor", rel(p.ImportPath), imp, gvisorHome))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reachForbidden walks the module packages that start imports, breadth
// first, and reports each forbidden package reached with the import chain.
// It does not walk on from a forbidden package: that edge is the one to fix.
func reachForbidden(start string, r layerRule, imports map[string][]string) []string {
	var out []string
	via := map[string]string{start: ""} // package -> the package that imported it
	queue := []string{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range imports[p] {
			if _, seen := via[imp]; seen || !inModule(imp) {
				continue
			}
			via[imp] = p
			if i := slices.IndexFunc(r.forbidden, func(f string) bool { return under(imp, f) }); i >= 0 {
				out = append(out, fmt.Sprintf("%s must not import %s/ but reaches %s (%s)",
					rel(start), r.forbidden[i], rel(imp), chain(imp, via)))
				continue
			}
			queue = append(queue, imp)
		}
	}
	return out
}

func inModule(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

// chain renders the import path from the walk's start to p.
func chain(p string, via map[string]string) string {
	var c []string
	for ; p != ""; p = via[p] {
		c = append(c, rel(p))
	}
	slices.Reverse(c)
	return strings.Join(c, " -> ")
}

// listModule runs go list on every package of the module. Packages that do
// not compile at the moment are still listed (-e), with the imports go list
// could read; empty or missing directories simply yield no package.
func listModule(t *testing.T) []pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", cmd.Dir, err, stderr.Bytes())
	}
	if stderr.Len() > 0 {
		t.Logf("go list: %s", stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			pkg
			Error *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Logf("%s does not load (checked with the imports go list could read): %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p.pkg)
	}
	return pkgs
}

func TestLayering(t *testing.T) {
	pkgs := listModule(t)
	if !slices.ContainsFunc(pkgs, func(p pkg) bool { return under(p.ImportPath, "identity") }) {
		t.Fatalf("go list found no package under %s/identity; is it listing the right module? got %v", module, pkgs)
	}
	for _, r := range layerRules {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return under(p.ImportPath, r.from) }) {
			t.Logf("%s/ has no Go package yet; nothing to check there", r.from)
		}
	}
	if v := violations(pkgs); len(v) > 0 {
		t.Errorf("layering violations (see docs/design.md, \"Architecture\"):\n\t%s", strings.Join(v, "\n\t"))
	}
}

// TestViolationsCatches is the positive control: violations must report
// each kind of breach in a synthetic module, and nothing else.
func TestViolationsCatches(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := []pkg{
		{m("netstack"), []string{"net/netip", gvisor + "/pkg/tcpip", m("netstack/forward")}},
		{m("netstack/forward"), []string{m("internal/util")}},
		{m("internal/util"), []string{m("sidecar/api")}},
		{m("sidecar/api"), nil},
		{m("wsproxy"), []string{gvisor + "/pkg/buffer", m("netstack"), m("identity")}},
		{m("identity"), []string{"crypto/hkdf", "golang.org/x/crypto/curve25519"}},
		{m("identity/keys"), []string{m("cmd/meshlaunch")}},
		{m("sidecar"), []string{m("netstack"), m("wsproxy"), m("identity")}},
		{m("launcher"), []string{gvisor}},
		{m("cmd/meshlaunch"), []string{m("sidecar"), m("launcher")}},
		{m("netstackx"), []string{m("sidecar"), gvisor + "/pkg/stack"}},
		{m("integration"), []string{"gvisor.dev/gvisorx", m("sidecar")}},
	}
	want := []string{
		"identity/keys must not import cmd/ but reaches cmd/meshlaunch (identity/keys -> cmd/meshlaunch)",
		"launcher imports gvisor.dev/gvisor: only netstack/ may import gVisor",
		"netstack must not import sidecar/ but reaches sidecar/api (netstack -> netstack/forward -> internal/util -> sidecar/api)",
		"netstack/forward must not import sidecar/ but reaches sidecar/api (netstack/forward -> internal/util -> sidecar/api)",
		"netstackx imports gvisor.dev/gvisor/pkg/stack: only netstack/ may import gVisor",
		"wsproxy imports gvisor.dev/gvisor/pkg/buffer: only netstack/ may import gVisor",
		"wsproxy must not import netstack/ but reaches netstack (wsproxy -> netstack)",
	}
	got := violations(pkgs)
	if !slices.Equal(got, want) {
		t.Fatalf("violations(synthetic module):\n got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if v := violations(pkgs[3:4]); v != nil {
		t.Fatalf("violations(clean module) = %q", v)
	}
}
