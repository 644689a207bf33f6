// Package nsfaults is the namespace tier of the carrier faults in the test
// matrix ("Faults to survive"): the real meshlaunch binary runs as
// "meshlaunch sidecar" in the pod namespace of an nstest.MeshCluster and as
// "meshlaunch run" or "meshlaunch tunnel" in the node namespace, and the
// carrier between node and Ingress is broken on purpose.
//
// The faults come from internal/faultrelay, run inside the test process:
// its listener lives on the node namespace's loopback and it dials the
// Ingress from the node namespace (nstest.DialerIn), so the launcher's
// --server is wss://127.0.0.1:PORT (the Ingress certificate names
// 127.0.0.1 too) and every byte of its websocket crosses the relay, where
// the test can cut, throttle or delay it and count what flows. Loss and
// delay at the packet level use netem on the node's link when the kernel
// has it.
//
// Each test builds its own cluster; the tests need root and skip
// otherwise. Tests named TestLong… run for minutes and skip unless
// MESHLAUNCH_LONG=1 (make test-long). The package has no code outside its
// tests.
package nsfaults
