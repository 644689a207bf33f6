package nssidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// TestSidecarHasNoCapabilities checks that the sidecar process itself
// (not a wrapper) runs as nobody with every capability set empty, and
// still serves its probes and the job's egress.
func TestSidecarHasNoCapabilities(t *testing.T) {
	nstest.Require(t)
	c := newCluster(t)
	sc := c.startSidecar(t)
	// "ip netns exec" and setpriv exec, so the pid is meshlaunch's own;
	// make sure, or the checks below would inspect a wrapper.
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", sc.Pid())); err != nil || exe != c.Bin {
		t.Fatalf("pid %d runs %q (%v), want the sidecar binary %s", sc.Pid(), exe, err, c.Bin)
	}
	const none = "0000000000000000"
	want := map[string]string{
		"Uid": "65534\t65534\t65534\t65534", "Gid": "65534\t65534\t65534\t65534", "Groups": "",
		"CapInh": none, "CapPrm": none, "CapEff": none, "CapBnd": none, "CapAmb": none,
		"NoNewPrivs": "1",
	}
	// Capabilities belong to threads: check every one of the process.
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", sc.Pid()))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of the sidecar: %v %v", tasks, err)
	}
	for _, status := range tasks {
		st := procStatus(t, status)
		for key, v := range want {
			if st[key] != v {
				t.Errorf("%s: %s = %q, want %q", status, key, st[key], v)
			}
		}
	}
	root := procStatus(t, fmt.Sprintf("/proc/%d/status", c.Ingress.Proc.Pid()))
	if root["CapEff"] == none || root["Uid"] == want["Uid"] {
		t.Errorf("control: the root-run nginx master shows Uid %q CapEff %q; the check above cannot tell", root["Uid"], root["CapEff"])
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		mustGet(t, c.pod, "http://"+nstest.SidecarAddr+path)
	}
	job := c.startJob(t, nil)
	job.WaitReady(t, 15*time.Second)
	wantPeer(t, mustGet(t, jobHTTP(t, job), serviceURL), nstest.PodIP)
}

// procStatus reads a /proc/.../status file into a map.
func procStatus(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		m[k] = strings.TrimSpace(v)
	}
	return m
}

// TestEgressByIPAndName: the job reaches the Service by IP and by name,
// the cluster sees the pod IP, and the in-tunnel DNS and config API give
// the job the pod's resolver view.
func TestEgressByIPAndName(t *testing.T) {
	nstest.Require(t)
	c := newCluster(t)
	c.startSidecar(t)
	job := c.startJob(t, nil)
	job.WaitReady(t, 15*time.Second)
	web := jobHTTP(t, job)

	t.Run("by IP, seen from the pod IP", func(t *testing.T) {
		wantPeer(t, mustGet(t, web, serviceURL), nstest.PodIP)
	})
	t.Run("in-tunnel DNS answers from the cluster's", func(t *testing.T) {
		r := jobResolver(job)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ips, err := r.LookupNetIP(ctx, "ip4", nstest.WebName+".")
		if err != nil || !slices.Equal(ips, []netip.Addr{netip.MustParseAddr(nstest.ServiceIP)}) {
			t.Fatalf("%s = %v, %v; want [%s]", nstest.WebName, ips, err, nstest.ServiceIP)
		}
		// The cluster's DNS has no such name: NXDOMAIN must come back
		// through the tunnel, not an address or a timeout.
		const missing = "missing.default.svc.cluster.local."
		ips, err = r.LookupNetIP(ctx, "ip4", missing)
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Fatalf("%s = %v, %v; want NXDOMAIN", missing, ips, err)
		}
	})
	t.Run("by name", func(t *testing.T) {
		wantPeer(t, mustGet(t, web, "http://"+nstest.WebName+"/"), nstest.PodIP)
	})
	t.Run("config API", func(t *testing.T) {
		body := mustGet(t, web, "http://"+meshapi.DefaultServiceAddr.String()+meshapi.ConfigPath)
		var got meshapi.JobConfig
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("config %q: %v", body, err)
		}
		checkJobConfig(t, got)
	})
}

func checkJobConfig(t *testing.T, got meshapi.JobConfig) {
	t.Helper()
	routes := []netip.Prefix{netip.MustParsePrefix(nstest.ServiceCIDR), netip.MustParsePrefix(nstest.ClusterCIDR)}
	search := []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	if got.Address.String() != nstest.PodIP {
		t.Errorf("address %v, want %s", got.Address, nstest.PodIP)
	}
	if !slices.Equal(got.Routes, routes) {
		t.Errorf("routes %v, want %v", got.Routes, routes)
	}
	if got.ServiceAddr != meshapi.DefaultServiceAddr || got.DNS.Nameserver != meshapi.DefaultServiceAddr {
		t.Errorf("service address %v, nameserver %v; want %v", got.ServiceAddr, got.DNS.Nameserver, meshapi.DefaultServiceAddr)
	}
	if !slices.Equal(got.DNS.Search, search) || got.DNS.Ndots != 5 {
		t.Errorf("search %q ndots %d, want %q ndots 5 (the pod's resolv.conf)", got.DNS.Search, got.DNS.Ndots, search)
	}
	if want := []string{"9000/tcp", "9001/udp"}; !slices.Equal(got.Expose, want) {
		t.Errorf("expose %q, want %q", got.Expose, want)
	}
}

// TestThroughHTTPProxy: the job's websocket goes through an
// authenticating HTTP proxy (CONNECT), and egress works over it.
func TestThroughHTTPProxy(t *testing.T) {
	nstest.Require(t)
	c := newCluster(t)
	proxy := c.Topo.StartProxy(t, "job", "s3cret")
	c.startSidecar(t)
	proxyURL, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	node := nstest.DialerIn(t, c.Topo.Node)
	var mu sync.Mutex
	var dialed []string
	job := c.startJob(t, func(cc *wsproxy.ClientConfig) {
		cc.Proxy = func(*url.URL) (*url.URL, error) { return proxyURL, nil }
		cc.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, addr)
			mu.Unlock()
			return node(ctx, network, addr)
		}
	})
	job.WaitReady(t, 15*time.Second)
	wantPeer(t, mustGet(t, jobHTTP(t, job), serviceURL), nstest.PodIP)

	mu.Lock()
	defer mu.Unlock()
	if len(dialed) == 0 || slices.ContainsFunc(dialed, func(a string) bool { return a != proxy.Addr }) {
		t.Errorf("the job dialled %q; want only the proxy %s", dialed, proxy.Addr)
	}
	if log := proxy.Proc.Stdout() + proxy.Proc.Stderr(); !strings.Contains(log, "CONNECT "+nstest.EdgeNodeIP+":443") {
		t.Errorf("tinyproxy logged no CONNECT to the Ingress:\n%s", log)
	}
}
