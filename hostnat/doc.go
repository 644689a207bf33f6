// Package hostnat gives a job in its own network namespace the node's
// network, without privileges: the job's default route points at a TUN
// interface whose packets end in a userspace netstack, and the netstack's
// forwarders re-dial every flow from the host with ordinary sockets (the
// same forwarders the sidecar uses for egress NAT, with a host dialer).
//
// The host's loopback is not reachable by default (a job must not reach
// the node's local daemons by accident); with AllowLoopback, connections
// to LoopbackAddr reach the host's 127.0.0.1, as slirp4netns's 10.0.2.2
// does. Link-local and metadata addresses stay denied.
//
// A NAT owns the goroutines that move packets between the TUN and the
// netstack; Close stops them and closes both.
package hostnat
