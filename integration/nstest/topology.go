package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Addresses of the simulated cluster. They are constants so that they can
// go straight into argv; parse with netip.MustParseAddr where a typed
// address is needed.
const (
	PodIP         = "10.244.1.5"  // the shadow pod, on pod's eth0
	SvcHostIP     = "10.244.0.10" // the Service host, on svc's eth0
	ServiceIP     = "10.96.0.10"  // the Service (ClusterIP), on svc's lo
	EdgeClusterIP = "10.244.0.2"  // the Ingress host's cluster side, edge's eth0
	EdgeNodeIP    = "198.18.0.1"  // the Ingress host's node side, edge's eth1
	NodeIP        = "198.18.0.2"  // the remote HPC node, node's eth0

	ClusterCIDR = "10.244.0.0/16"
	ServiceCIDR = "10.96.0.0/16"
	NodeCIDR    = "198.18.0.0/24"
)

// PodResolvConf is the pod's /etc/resolv.conf, as kubelet writes it for a
// pod in namespace "default" with ClusterFirst DNS.
const PodResolvConf = "nameserver " + ServiceIP + "\n" +
	"search default.svc.cluster.local svc.cluster.local cluster.local\n" +
	"options ndots:5\n"

// Options tunes a Topology. The zero value is the documented layout.
type Options struct {
	// MTU of the bridge and every veth; 0 means 1500.
	MTU int
}

// Topology is one simulated cluster. Its fields are the namespace names
// (at most 10 bytes, so derived interface names stay within 15). Methods
// may be called from any test goroutine; those that take a testing.TB call
// t.Fatal on failure and so belong on that test's goroutine.
type Topology struct {
	Prefix string // "ml" + 4 hex digits, shared by every namespace below
	Br     string // holds bridge br0, the cluster's L2 segment
	Svc    string // Service host: SvcHostIP, ServiceIP on lo
	Pod    string // shadow pod: PodIP, route ServiceCIDR via SvcHostIP
	Edge   string // Ingress host: EdgeClusterIP and EdgeNodeIP, no forwarding
	Node   string // remote node: NodeIP, default route via EdgeNodeIP

	t testing.TB
}

// NewTopology creates the namespaces and links described in the package
// comment. Everything is torn down in t.Cleanup: every process in the
// namespaces is killed, then the namespaces and their /etc/netns
// directories are removed. Teardown is registered before the first
// namespace exists, so a failure halfway still cleans up.
func NewTopology(t testing.TB, opts Options) *Topology {
	t.Helper()
	Require(t)
	prefix, err := freePrefix()
	if err != nil {
		t.Fatalf("nstest: %v", err)
	}
	tp := &Topology{
		Prefix: prefix,
		Br:     prefix + "br",
		Svc:    prefix + "svc",
		Pod:    prefix + "pod",
		Edge:   prefix + "edge",
		Node:   prefix + "node",
		t:      t,
	}
	t.Cleanup(tp.destroy)
	if err := tp.build(opts); err != nil {
		t.Fatalf("nstest: build topology %s: %v", prefix, err)
	}
	return tp
}

// Namespaces returns every namespace name of the topology.
func (tp *Topology) Namespaces() []string {
	return []string{tp.Br, tp.Svc, tp.Pod, tp.Edge, tp.Node}
}

// freePrefix returns a random prefix no existing namespace uses.
func freePrefix() (string, error) {
	for range 16 {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("random prefix: %w", err)
		}
		p := "ml" + hex.EncodeToString(b[:])
		matches, err := filepath.Glob(filepath.Join("/run/netns", p+"*"))
		if err != nil {
			return "", fmt.Errorf("list /run/netns: %w", err)
		}
		if len(matches) == 0 {
			return p, nil
		}
	}
	return "", errors.New("no free namespace prefix after 16 tries")
}

func (tp *Topology) build(opts Options) error {
	mtu := opts.MTU
	if mtu == 0 {
		mtu = 1500
	}
	for _, args := range tp.plan(strconv.Itoa(mtu)) {
		if err := ip(args...); err != nil {
			return err
		}
	}
	if err := tp.writeResolvConf(); err != nil {
		return err
	}
	// New namespaces start with forwarding off; say so explicitly, because
	// the node's isolation from the cluster depends on it.
	return tp.sysctl(tp.Edge, "net/ipv4/ip_forward", "0")
}

// plan lists the ip(8) invocations that wire the topology, in order.
func (tp *Topology) plan(mtu string) [][]string {
	var p [][]string
	add := func(args ...string) { p = append(p, args) }
	for _, ns := range tp.Namespaces() {
		add("netns", "add", ns)
		add("-n", ns, "link", "set", "lo", "up")
	}
	add("-n", tp.Br, "link", "add", "br0", "mtu", mtu, "type", "bridge")
	add("-n", tp.Br, "link", "set", "br0", "up")
	for _, m := range []struct{ port, ns, addr string }{
		{"svc", tp.Svc, SvcHostIP + "/16"},
		{"pod", tp.Pod, PodIP + "/16"},
		{"edge", tp.Edge, EdgeClusterIP + "/16"},
	} {
		// Created inside br with the peer moved at once: no name is ever
		// taken in the root namespace, so parallel topologies cannot clash.
		add("-n", tp.Br, "link", "add", m.port, "mtu", mtu, "type", "veth",
			"peer", "name", "eth0", "mtu", mtu, "netns", m.ns)
		add("-n", tp.Br, "link", "set", m.port, "master", "br0", "up")
		add("-n", m.ns, "addr", "add", m.addr, "dev", "eth0")
		add("-n", m.ns, "link", "set", "eth0", "up")
	}
	add("-n", tp.Svc, "addr", "add", ServiceIP+"/32", "dev", "lo")
	add("-n", tp.Pod, "route", "add", ServiceCIDR, "via", SvcHostIP)
	add("-n", tp.Edge, "link", "add", "eth1", "mtu", mtu, "type", "veth",
		"peer", "name", "eth0", "mtu", mtu, "netns", tp.Node)
	add("-n", tp.Edge, "addr", "add", EdgeNodeIP+"/24", "dev", "eth1")
	add("-n", tp.Edge, "link", "set", "eth1", "up")
	add("-n", tp.Node, "addr", "add", NodeIP+"/24", "dev", "eth0")
	add("-n", tp.Node, "link", "set", "eth0", "up")
	add("-n", tp.Node, "route", "add", "default", "via", EdgeNodeIP)
	return p
}

// writeResolvConf writes /etc/netns/<pod>/resolv.conf, which
// "ip netns exec" bind-mounts over /etc/resolv.conf.
func (tp *Topology) writeResolvConf() error {
	dir := filepath.Join("/etc/netns", tp.Pod)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(path, []byte(PodResolvConf), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// sysctl writes value to /proc/sys/key inside ns. /proc/sys/net is per
// network namespace of the writer, so the write runs inside ns.
func (tp *Topology) sysctl(ns, key, value string) error {
	path := filepath.Join("/proc/sys", key)
	out, err := exec.Command("ip", "netns", "exec", ns,
		"sh", "-c", `printf '%s\n' "$1" > "$2"`, "sh", value, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sysctl %s=%s in %s: %w: %s", key, value, ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Sysctl sets /proc/sys/key (for example "net/ipv4/ip_forward") inside ns.
func (tp *Topology) Sysctl(t testing.TB, ns, key, value string) {
	t.Helper()
	if err := tp.checkNS(ns); err != nil {
		t.Fatalf("nstest: %v", err)
	}
	if err := tp.sysctl(ns, key, value); err != nil {
		t.Fatalf("nstest: %v", err)
	}
}

// checkNS rejects names that are not namespaces of this topology, so a
// typo can never run a process in the root namespace.
func (tp *Topology) checkNS(ns string) error {
	if !slices.Contains(tp.Namespaces(), ns) {
		return fmt.Errorf("%q is not a namespace of topology %s", ns, tp.Prefix)
	}
	return nil
}

// destroy kills every process in the namespaces, then deletes them and
// their /etc/netns directories. It tolerates a half-built topology.
func (tp *Topology) destroy() {
	var errs []error
	for _, ns := range tp.Namespaces() {
		errs = append(errs, killNamespace(ns))
	}
	for _, ns := range tp.Namespaces() {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			errs = append(errs, ip("netns", "del", ns))
		}
		if err := os.RemoveAll(filepath.Join("/etc/netns", ns)); err != nil {
			errs = append(errs, fmt.Errorf("remove /etc/netns/%s: %w", ns, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		tp.t.Errorf("nstest: tear down topology %s: %v", tp.Prefix, err)
	}
}

// killNamespace SIGKILLs every process in ns until none is left (5 s max).
// A namespace that does not exist has nothing to kill.
func killNamespace(ns string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := namespacePids(ns)
		if err != nil || len(pids) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in %s after SIGKILL", pids, ns)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: already gone
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// namespacePids lists the processes whose network namespace is ns.
func namespacePids(ns string) ([]int, error) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns pids %s: %w", ns, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("ip netns pids %s: bad pid %q", ns, f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

var ipMu sync.Mutex // serialises "ip netns add/del", which rewrite /run/netns mounts

// ip runs ip(8) in the root namespace (or in one via "-n").
func ip(args ...string) error {
	if len(args) > 1 && args[0] == "netns" && (args[1] == "add" || args[1] == "del") {
		ipMu.Lock()
		defer ipMu.Unlock()
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
