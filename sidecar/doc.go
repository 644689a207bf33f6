// Package sidecar is the shadow pod's end of the mesh: one HTTP listener
// for the websocket carrying WireGuard, health, readiness, Prometheus
// metrics and status; a wireguard-go device on a netstack whose forwarders
// re-dial the job's flows from the pod's own sockets (egress NAT, under a
// destination policy); listeners on exposed pod ports that forward into the
// tunnel with the client's address as the source (ingress); and DNS plus a
// configuration API on an address inside the tunnel.
//
// It needs no privileges: no root, no capabilities, no /dev/net/tun.
//
// Lifecycle: New validates and builds; Serve runs until its context ends,
// then shuts down gracefully (see Serve). Every goroutine is owned by the
// Sidecar and stopped before Serve returns. Configuration and every flag
// are documented in docs/sidecar.md.
package sidecar
