package nstunnel

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const (
	nobody = "nobody"
	// Ports the sidecar exposes, the only ones -R may use.
	exposedTCP = nstest.ExposedTCP
	exposedUDP = nstest.ExposedUDP
)

// cluster is an nstest.MeshCluster whose sidecar logs at debug level,
// routes only the Service CIDR and exposes 9000/tcp and 9001/udp, with a
// copy of the test binary, Roles, for this package's roles:
// $NSTUNNEL_ROLE picks the role. Nothing in the node namespace can
// resolve the cluster's names (nstest.WebName).
type cluster struct {
	*nstest.MeshCluster
}

// clusterOpts changes the cluster; the zero value is the layout above.
type clusterOpts struct {
	// records are extra DNS names of the cluster, besides nstest.WebName.
	records map[string]netip.Addr
	// loopbackSAN adds 127.0.0.1 to the Ingress certificate, so that a
	// client in node can verify it through a relay on its loopback.
	loopbackSAN bool
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	nstest.Require(t)
	opts := nstest.MeshOpts{
		Meshlaunch: meshlaunchBin,
		Roles:      "nstunnel-roles",
		Records:    o.records,
		Sidecar:    nstest.SidecarOpts{LogLevel: "debug", Routes: []string{nstest.ServiceCIDR}},
	}
	if o.loopbackSAN {
		certs, err := nstest.GenerateCerts(nstest.SharedDir(t, "nstunnel-certs-"), nstest.IngressServerName,
			netip.MustParseAddr(nstest.EdgeNodeIP), netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		opts.Ingress.Certs = certs
	}
	return &cluster{nstest.NewMeshCluster(t, opts)}
}

// tunnelArgv is "meshlaunch tunnel" against server (the Ingress when "")
// with the cluster's CA and secret, logging JSON, then args.
func (c *cluster) tunnelArgv(server string, args ...string) []string {
	if server == "" {
		server = c.Ingress.URL
	}
	argv := []string{c.Bin, "--log-format", "json", "tunnel", "--server", server,
		"--ca-file", c.Ingress.CAFile, "--token-file", c.Token}
	return append(argv, args...)
}

// asNobody runs a process as nobody with no capabilities, without the
// test host's proxy settings, bounded by timeout when run to completion.
func asNobody(timeout time.Duration) nstest.ProcOpts {
	env := []string{"HOME=/tmp", "GORACE=atexit_sleep_ms=0"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	return nstest.ProcOpts{User: nobody, Env: env, Timeout: timeout}
}

// startTunnel runs "meshlaunch tunnel" in node as nobody in the
// background; cleanup stops it.
func (c *cluster) startTunnel(t *testing.T, server string, args ...string) *nstest.Proc {
	t.Helper()
	return c.Topo.Start(t, c.Topo.Node, asNobody(0), c.tunnelArgv(server, args...)...)
}

// startRole runs one of this package's roles in ns as nobody.
func (c *cluster) startRole(t *testing.T, ns, role string, args ...string) *nstest.Proc {
	t.Helper()
	opts := asNobody(0)
	opts.Env = append(opts.Env, roleEnv+"="+role)
	return c.Topo.Start(t, ns, opts, append([]string{c.Roles}, args...)...)
}

// logRecord is one JSON log line of meshlaunch.
type logRecord map[string]any

func (r logRecord) str(key string) string {
	s, _ := r[key].(string)
	return s
}

// logRecords parses meshlaunch's JSON log lines; other lines are skipped.
func logRecords(stderr string) []logRecord {
	var out []logRecord
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r logRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// waitLog waits until p has logged a record that match accepts and
// returns it; it fails t if p exits first or timeout passes.
func waitLog(t *testing.T, p *nstest.Proc, timeout time.Duration, what string, match func(logRecord) bool) logRecord {
	t.Helper()
	return waitLogN(t, p, timeout, 1, what, match)
}

// waitLogN waits until p has logged n records that match accepts and
// returns the n-th; it fails t if p exits first or timeout passes.
func waitLogN(t *testing.T, p *nstest.Proc, timeout time.Duration, n int, what string, match func(logRecord) bool) logRecord {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		seen := 0
		for _, r := range logRecords(p.Stderr()) {
			if match(r) {
				if seen++; seen == n {
					return r
				}
			}
		}
		select {
		case <-p.Done():
			code, _ := p.Wait(time.Second)
			t.Fatalf("%s exited (%d) before logging %s\nstderr:\n%s", p.Name(), code, what, p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s logged no %s within %v\nstderr:\n%s", p.Name(), what, timeout, p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// msgIs matches log records with message msg.
func msgIs(msg string) func(logRecord) bool {
	return func(r logRecord) bool { return r.str("msg") == msg }
}

// waitStdout waits until p's stdout holds want (nstest.Proc.WaitStdout).
func waitStdout(t *testing.T, p *nstest.Proc, timeout time.Duration, want string) string {
	t.Helper()
	return p.WaitStdout(t, timeout, want)
}

// retryUntil runs argv in ns as nobody until ok accepts its stdout (after
// exit 0), and fails t after timeout; it returns that stdout.
func (c *cluster) retryUntil(t *testing.T, ns string, timeout time.Duration, ok func(string) bool, argv ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		stdout, stderr, code := c.Topo.Run(t, ns, asNobody(timeout), argv...)
		if code == 0 && ok(stdout) {
			return stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q in %s: exit %d, stdout %q after retrying for %v: %s", argv, ns, code, stdout, timeout, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// anyOutput accepts every stdout.
func anyOutput(string) bool { return true }

// curl is a bounded curl of url with extra flags before it.
func curl(url string, flags ...string) []string {
	return append(append([]string{"curl", "-sS", "--connect-timeout", "3", "--max-time", "5"}, flags...), url)
}

// wantClientHost checks that body, an httpecho answer, names a client at
// host.
func wantClientHost(t *testing.T, what, body, host string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(strings.TrimSpace(body))
	if err != nil || ap.Addr().String() != host {
		t.Errorf("%s: httpecho saw client %q, want %s:PORT", what, body, host)
	}
}
