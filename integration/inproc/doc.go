// Package inproc holds the in-process tier of meshlaunch's integration
// tests: a sidecar-shaped and a job-shaped peer (package
// internal/meshtest) joined by a websocket on loopback, with wireguard-go
// and the netstack forwarders on the path. It needs no privileges.
package inproc
