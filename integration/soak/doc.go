// Package soak is the bounded soak of meshlaunch (make soak DURATION=10m):
// the real sidecar, as nobody behind nginx in an nstest topology, carries
// the jobs of three "meshlaunch run" launchers, each an explicit peer with
// a key of its own, for the whole duration while the test keeps cutting
// every websocket. Each job, a role of this package's test binary, mixes
// short requests to the Service by name, long byte-checked transfers in
// both directions and DNS queries; the cluster requests the job at the pod
// IP (the first launcher's) through an exposed port. Every flow of every
// launcher must deliver every byte unchanged; the sidecar's goroutines,
// descriptors and memory must come back to where they were, with no peer
// left connected.
//
// TestSoak skips unless MESHLAUNCH_SOAK holds a Go duration. It needs root
// and skips otherwise; the package has no code outside its tests.
package soak
