package nstest_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// TestDialerIn dials from the node namespace out of the test process,
// which itself cannot reach the node, and checks that no thread of the
// process is left in the node's namespace afterwards.
func TestDialerIn(t *testing.T) {
	nstest.Require(t)
	rootNS := threadNetNS(t)
	topo := nstest.NewTopology(t, nstest.Options{})
	nodeEcho := nstest.NodeIP + ":8081"
	topo.StartRole(t, topo.Node, nobody, "httpecho", nodeEcho)
	topo.StartRole(t, topo.Pod, nobody, "httpecho", nstest.PodIP+":8080")
	topo.WaitTCP(t, topo.Node, nodeEcho, 10*time.Second)
	topo.WaitTCP(t, topo.Pod, nstest.PodIP+":8080", 10*time.Second)
	ing := topo.StartIngress(t, nstest.IngressOpts{})
	dial := nstest.DialerIn(t, topo.Node)

	t.Run("socket is in the node", func(t *testing.T) {
		// Only the node has NodeIP: the root namespace would connect from
		// another address, if at all.
		c, err := dial(context.Background(), "tcp", nodeEcho)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().String(); got != nstest.NodeIP {
			t.Fatalf("socket bound to %s, want %s (the node's address)", got, nstest.NodeIP)
		}
		wantPeer(t, getVia(t, dial, "http://"+nodeEcho+"/", nil), nstest.NodeIP)
	})
	t.Run("node reaches the pod through the ingress", func(t *testing.T) {
		cfg := &tls.Config{RootCAs: ing.Certs.CAPool(), ServerName: nstest.EdgeNodeIP}
		wantPeer(t, getVia(t, dial, "https://"+nstest.EdgeNodeIP+"/", cfg), nstest.EdgeClusterIP)
	})
	t.Run("names are refused", func(t *testing.T) {
		if c, err := dial(context.Background(), "tcp", "localhost:8081"); err == nil {
			c.Close()
			t.Fatal("dial by name succeeded; it would resolve in the root namespace")
		}
	})
	t.Run("no thread stays in the node", func(t *testing.T) {
		// Enough dials that some land on the main thread.
		for range 200 {
			getVia(t, dial, "http://"+nodeEcho+"/", nil)
		}
		checkThreads(t, rootNS)
	})
}

// getVia GETs url over a transport that dials with dial and returns the
// body; it fails t unless the answer is 200.
func getVia(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), url string, cfg *tls.Config) string {
	t.Helper()
	tr := &http.Transport{DialContext: dial, TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %q, %v", url, resp.Status, body, err)
	}
	return string(body)
}

// threadNetNS is the network namespace of the calling thread, as
// "net:[INODE]".
func threadNetNS(t *testing.T) string {
	t.Helper()
	ns, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// checkThreads fails t if a thread of the process is outside rootNS. The
// main thread counts too: Go parks it for good, in whatever namespace it
// is, when a goroutine exits locked to it, and the process is then a
// member of that namespace for "ip netns pids" and the harness's
// teardown.
func checkThreads(t *testing.T, rootNS string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second) // thread exit is asynchronous
	for {
		stray := strayThreads(t, rootNS)
		if len(stray) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads %v are still outside the root namespace %s", stray, rootNS)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func strayThreads(t *testing.T, rootNS string) []string {
	tasks, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	var stray []string
	for _, task := range tasks {
		ns, err := os.Readlink(filepath.Join(task, "ns", "net"))
		if err != nil || ns == rootNS {
			continue // a thread that exited meanwhile, or one at home
		}
		stray = append(stray, filepath.Base(task)+"="+ns)
	}
	return stray
}
