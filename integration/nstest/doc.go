// Package nstest builds a simulated Kubernetes cluster out of network
// namespaces for meshlaunch's namespace tier (docs/design.md, "How it is
// checked"). It needs root (CI is root) and skips otherwise; see Require.
//
// One Topology is five namespaces named Prefix+role, with a random Prefix
// ("ml" and four hex digits) so that topologies of parallel tests never meet:
//
//	                 br: bridge br0, the cluster's L2 segment
//	        +------------------+------------------+
//	       svc                pod               edge ----------- node
//	eth0 10.244.0.10   eth0 10.244.1.5   eth0 10.244.0.2    eth0 198.18.0.2
//	lo   10.96.0.10    10.96.0.0/16 via  eth1 198.18.0.1    default via
//	     (Service IP)  10.244.0.10       no ip_forward      198.18.0.1
//
// The node therefore reaches the cluster only through the Ingress (nginx,
// StartIngress) or the HTTP proxy (StartProxy) in edge. The pod's
// /etc/resolv.conf points at dnsmasq on the Service IP (StartDNS).
//
// Processes run through "ip netns exec", optionally as an unprivileged
// user with no capabilities (setpriv), in their own process group, with
// output in files that are dumped when the test fails; everything is killed
// and every namespace deleted in t.Cleanup. Helper servers (httpecho,
// tcpecho, udpecho) and probes are roles of the test binary itself, which
// is why tests must call Main from TestMain.
//
// A test package uses it like this:
//
//	func TestMain(m *testing.M) { nstest.Main(m) }
//
//	func TestService(t *testing.T) {
//		topo := nstest.NewTopology(t, nstest.Options{}) // skips unless root
//		topo.StartRole(t, topo.Svc, "", "httpecho", nstest.ServiceIP+":80")
//		topo.WaitTCP(t, topo.Pod, nstest.ServiceIP+":80", 5*time.Second)
//		body, _, code := topo.Run(t, topo.Pod, nstest.ProcOpts{User: "nobody"},
//			"curl", "-sS", "http://"+nstest.ServiceIP+"/")
//		// body is "10.244.1.5:PORT", code 0
//	}
//
// For meshlaunch's own tests, BuildMeshlaunch builds the binary once in
// TestMain, and NewMeshCluster builds a Topology around "meshlaunch
// sidecar": httpecho on the Service, dnsmasq, nginx as the Ingress to the
// sidecar, which runs as nobody, and a directory every user can read with
// the binaries and the secret.
//
// Only addresses inside 10.244.0.0/16, 10.96.0.0/16 and 198.18.0.0/24 of
// namespaces this package created are ever used.
package nstest
