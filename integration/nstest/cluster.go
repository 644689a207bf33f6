package nstest

import (
	"cmp"
	"crypto/tls"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Names and ports of a MeshCluster.
const (
	// SidecarAddr is where a MeshCluster's sidecar listens and its Ingress
	// proxies to, unless MeshOpts.SidecarAddr says otherwise.
	SidecarAddr = PodIP + ":8080"
	// WebName resolves to ServiceIP in a MeshCluster's DNS; a job asks for
	// "web" and the pod's search path completes it.
	WebName = "web.default.svc.cluster.local"
	// ExposedTCP and ExposedUDP are the ports the sidecar exposes unless
	// SidecarOpts.Expose says otherwise (--expose 9000 --expose 9001/udp):
	// the cluster reaches a job's listeners on them at PodIP.
	ExposedTCP = "9000"
	ExposedUDP = "9001"
)

// sidecarUser runs a MeshCluster's sidecar, with no capabilities.
const sidecarUser = "nobody"

// MeshOpts configures NewMeshCluster. Only Meshlaunch is required; the
// rest of the zero value is the layout MeshCluster describes.
type MeshOpts struct {
	// Meshlaunch is the binary from BuildMeshlaunch, installed as
	// Dir/meshlaunch.
	Meshlaunch *os.File
	// Roles, if set, installs a copy of the test binary as Dir/Roles, for
	// the package's own roles run as nobody (jobs included).
	Roles string
	// SidecarAddr is where the sidecar listens and the Ingress proxies to;
	// "" is SidecarAddr.
	SidecarAddr string
	// Records are DNS names of the cluster besides WebName.
	Records map[string]netip.Addr
	// Ingress configures nginx; an empty Upstream is the sidecar's
	// address.
	Ingress IngressOpts
	// Secret is the secret in the token file; "" is a new one from
	// "meshlaunch token".
	Secret string
	// Sidecar is the sidecar's command line; see SidecarArgv.
	Sidecar SidecarOpts
	// NoSidecar leaves the sidecar to the test: NewMeshCluster starts
	// none and MeshCluster.Sidecar is nil.
	NoSidecar bool
}

// SidecarOpts shapes the sidecar's command line (SidecarArgv).
type SidecarOpts struct {
	// LogLevel is meshlaunch's --log-level; "" leaves its default.
	LogLevel string
	// Routes are the --route flags; nil is ServiceCIDR and ClusterCIDR.
	Routes []string
	// Expose are the --expose flags; nil is ExposedTCP and ExposedUDP/udp.
	Expose []string
	// Flags are more flags of "meshlaunch sidecar", after the others.
	Flags []string
}

// MeshCluster is one Topology around meshlaunch's sidecar: httpecho as
// root on ServiceIP:80 in svc, dnsmasq naming it WebName (and
// MeshOpts.Records), nginx as the Ingress to the sidecar's address,
// "meshlaunch sidecar" as nobody with no capabilities in pod, ready
// through the Ingress, and a directory every user can read holding the
// binaries and the secret.
type MeshCluster struct {
	Topo    *Topology
	Ingress *Ingress // a test that restarts nginx may replace it
	Sidecar *Proc    // nil with MeshOpts.NoSidecar
	Dir     string   // 0755, removed at cleanup
	Bin     string   // meshlaunch, executable by every user
	Roles   string   // the copy of the test binary; "" without MeshOpts.Roles
	Token   string   // the secret's file, readable by every user

	addr    string // the sidecar's listen address
	sidecar SidecarOpts
}

// NewMeshCluster builds the cluster; everything is stopped and removed at
// t's cleanup. It skips t unless the process runs as root (NewTopology) or
// if nginx or dnsmasq is missing.
func NewMeshCluster(t testing.TB, opts MeshOpts) *MeshCluster {
	t.Helper()
	topo := NewTopology(t, Options{})
	c := &MeshCluster{
		Topo:    topo,
		Dir:     SharedDir(t, "nstest-mesh-"),
		addr:    cmp.Or(opts.SidecarAddr, SidecarAddr),
		sidecar: opts.Sidecar,
	}
	c.Bin = Install(t, c.Dir, "meshlaunch", opts.Meshlaunch)
	if opts.Roles != "" {
		c.Roles = installTestBinary(t, c.Dir, opts.Roles)
	}
	secret := opts.Secret
	if secret == "" {
		secret = c.NewSecret(t)
	}
	c.Token = c.writeToken(t, "token", secret)
	topo.StartRole(t, topo.Svc, "", "httpecho", ServiceIP+":80")
	records := map[string]netip.Addr{WebName: netip.MustParseAddr(ServiceIP)}
	maps.Copy(records, opts.Records)
	topo.StartDNS(t, records)
	ingOpts := opts.Ingress
	ingOpts.Upstream = cmp.Or(ingOpts.Upstream, c.addr)
	c.Ingress = topo.StartIngress(t, ingOpts)
	topo.WaitTCP(t, topo.Svc, ServiceIP+":80", 10*time.Second)
	if !opts.NoSidecar {
		c.Sidecar = topo.Start(t, topo.Pod, ProcOpts{User: sidecarUser}, c.SidecarArgv()...)
		c.WaitReady(t, c.Sidecar, 15*time.Second)
	}
	return c
}

// SidecarArgv is the sidecar's command line, MeshOpts.Sidecar's flags and
// then extra:
//
//	meshlaunch [--log-level L] sidecar --listen ADDR --token-file TOKEN
//	    --pod-ip PodIP --route R... --expose P... FLAGS... EXTRA...
func (c *MeshCluster) SidecarArgv(extra ...string) []string {
	argv := []string{c.Bin}
	if c.sidecar.LogLevel != "" {
		argv = append(argv, "--log-level", c.sidecar.LogLevel)
	}
	argv = append(argv, "sidecar", "--listen", c.addr, "--token-file", c.Token, "--pod-ip", PodIP)
	routes := c.sidecar.Routes
	if routes == nil {
		routes = []string{ServiceCIDR, ClusterCIDR}
	}
	for _, r := range routes {
		argv = append(argv, "--route", r)
	}
	expose := c.sidecar.Expose
	if expose == nil {
		expose = []string{ExposedTCP, ExposedUDP + "/udp"}
	}
	for _, p := range expose {
		argv = append(argv, "--expose", p)
	}
	argv = append(argv, c.sidecar.Flags...)
	return append(argv, extra...)
}

// WaitReady polls the sidecar's /readyz from the node through the Ingress,
// the path of a launcher or tunnel there, until it answers 200; it fails t
// if sidecar exits first or timeout passes.
func (c *MeshCluster) WaitReady(t testing.TB, sidecar *Proc, timeout time.Duration) {
	t.Helper()
	tr := &http.Transport{
		DialContext:       DialerIn(t, c.Topo.Node),
		TLSClientConfig:   &tls.Config{RootCAs: c.Ingress.Certs.CAPool()},
		DisableKeepAlives: true, // no connection outlives a request
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	url := strings.Replace(c.Ingress.URL, "wss://", "https://", 1) + "/readyz"
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-sidecar.Done():
			t.Fatalf("sidecar exited before it was ready:\n%s", sidecar.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar not ready at %s within %v (last: %v)", url, timeout, statusOrErr(resp, err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func statusOrErr(resp *http.Response, err error) any {
	if err != nil {
		return err
	}
	return resp.Status
}

// NewSecret returns a new secret from "meshlaunch token".
func (c *MeshCluster) NewSecret(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(c.Bin, "token").Output()
	if err != nil {
		t.Fatalf("meshlaunch token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// NewToken writes a new secret from "meshlaunch token" into Dir/name,
// readable by every user, and returns the file's path.
func (c *MeshCluster) NewToken(t testing.TB, name string) string {
	t.Helper()
	return c.writeToken(t, name, c.NewSecret(t))
}

// writeToken writes secret into Dir/name, readable by every user, and
// returns the file's path.
func (c *MeshCluster) writeToken(t testing.TB, name, secret string) string {
	t.Helper()
	path := filepath.Join(c.Dir, name)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
