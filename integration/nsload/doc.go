// Package nsload is the namespace tier's load tests (the "Load to hold"
// rows of the test matrix, docs/security.md): the real meshlaunch binary
// runs as "meshlaunch sidecar" in the pod namespace of an
// nstest.MeshCluster and as "meshlaunch run" in the node namespace, both
// as nobody with no capabilities, and a copy of the test binary plays the
// job, the Service's server and the cluster's clients (its roles:
// main_test.go).
//
// Every transfer is byte-checked: the bytes are a keyed pseudorandom
// stream that the receiver regenerates and compares (echo), or whose
// SHA-256 the server sends back (upload). The tests measure what the
// sidecar holds while they run (RSS, goroutines, file descriptors, flows)
// from its /metrics and /proc, and log the figures.
//
// Each test builds its own topology; they run one after another so that
// the figures of one are not the load of another. The tests need root
// and skip otherwise; the package has no code outside its tests.
package nsload
