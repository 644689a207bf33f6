package nstest

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// readyName is queried to see that dnsmasq answers; cluster.local is
// local to it, so the answer is NXDOMAIN unless a test defines the name.
const readyName = "nstest-ready.cluster.local."

// StartDNS starts dnsmasq in svc on ServiceIP:53, the pod's nameserver,
// answering records (full names such as "web.default.svc.cluster.local")
// and NXDOMAIN for any other name under cluster.local, and waits until it
// answers. It forwards nothing. It skips t if dnsmasq is not installed.
func (tp *Topology) StartDNS(t testing.TB, records map[string]netip.Addr) *Proc {
	t.Helper()
	bin := lookPathOrSkip(t, "dnsmasq", "dnsmasq-base")
	args, err := dnsmasqArgs(t.TempDir(), records)
	if err != nil {
		t.Fatalf("nstest: dnsmasq: %v", err)
	}
	p := tp.Start(t, tp.Svc, ProcOpts{}, append([]string{bin}, args...)...)
	_, stderr, code := tp.RunRole(t, tp.Svc, ProcOpts{}, "dnsq", ServiceIP+":53", readyName, dnsReadyTimeout.String())
	if code != 0 {
		t.Fatalf("nstest: dnsmasq does not answer on %s:53: %s\ndnsmasq stderr:\n%s", ServiceIP, strings.TrimSpace(stderr), tail([]byte(p.Stderr())))
	}
	return p
}

// dnsmasqArgs: in the foreground, logging queries to stderr, reading no
// configuration, hosts file or upstream servers, staying root (the
// dnsmasq user may not exist), bound only to the Service IP.
func dnsmasqArgs(dir string, records map[string]netip.Addr) ([]string, error) {
	args := []string{
		"--keep-in-foreground", "--log-facility=-", "--log-queries",
		"--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-poll",
		"--user=root", "--pid-file=" + filepath.Join(dir, "dnsmasq.pid"),
		"--listen-address=" + ServiceIP, "--bind-interfaces", "--port=53",
		"--local=/cluster.local/",
	}
	for _, name := range slices.Sorted(maps.Keys(records)) {
		addr := records[name]
		if name == "" || strings.ContainsAny(name, ", \t\n/") || !addr.IsValid() {
			return nil, fmt.Errorf("bad record %q -> %v", name, addr)
		}
		args = append(args, fmt.Sprintf("--host-record=%s,%s", strings.TrimSuffix(name, "."), addr))
	}
	return args, nil
}

// dnsReadyTimeout bounds how long StartDNS waits for the first answer.
const dnsReadyTimeout = 10 * time.Second
