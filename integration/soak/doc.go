// Package soak is the bounded soak of meshlaunch (make soak DURATION=10m):
// the real sidecar, as nobody behind nginx in an nstest topology, carries
// a job under "meshlaunch run" for the whole duration while the test
// keeps cutting the websocket. The job, a role of this package's test
// binary, mixes short requests to the Service by name, long byte-checked
// transfers in both directions and DNS queries; the cluster requests the
// job at the pod IP through an exposed port. Every flow must deliver
// every byte unchanged; the sidecar's goroutines, descriptors and memory
// must come back to where they were.
//
// TestSoak skips unless MESHLAUNCH_SOAK holds a Go duration. It needs root
// and skips otherwise; the package has no code outside its tests.
package soak
