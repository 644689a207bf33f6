// Package messages is the typed protocol between the launcher's parent
// (host network namespace) and its child (inside the new namespaces).
//
// Parent and child never import each other; both import this package. The
// transport is one end each of a SOCK_SEQPACKET socketpair: every message is
// one datagram holding one JSON object with a "type" field, optionally
// carrying file descriptors (SCM_RIGHTS). The exchange is:
//
//	parent -> child  config  (network, DNS and job configuration)
//	child  -> parent ready   (+ the TUN file descriptor) or error
//	child  -> parent hosttun (+ the host-NAT TUN descriptor), if asked for
//	parent -> child  go      (the tunnel is up: start the job)
package messages

import (
	"net/netip"
)

// Argv markers: the parent re-executes its own binary with os.Args[1] set to
// one of these; the child dispatcher recognises them before anything else.
const (
	// ChildArg selects the namespace child that runs the job.
	ChildArg = "__meshlaunch-ns-child"
	// ProbeArg selects the doctor probe (see launcher.Check).
	ProbeArg = "__meshlaunch-ns-probe"
)

// ChildFD is the descriptor number of the child's end of the socketpair
// (exec.Cmd.ExtraFiles[0]).
const ChildFD = 3

// Type names a message.
type Type string

// Message types.
const (
	TypeConfig Type = "config"
	TypeReady  Type = "ready"
	TypeError  Type = "error"
	TypeGo     Type = "go"
	// TypeHostTUN follows Ready when Config.HostTun is set; it carries the
	// host-NAT interface's descriptor.
	TypeHostTUN Type = "hosttun"
)

// Message is the envelope of every datagram. Exactly the field that matches
// Type is set.
type Message struct {
	Type   Type    `json:"type"`
	Config *Config `json:"config,omitempty"`
	Ready  *Ready  `json:"ready,omitempty"`
	Error  *Error  `json:"error,omitempty"`
}

// Config is what the child needs to build the namespace and run the job.
type Config struct {
	// TunName is the TUN interface name (at most 15 bytes).
	TunName string `json:"tunName"`
	// Addr is the pod IP; it is assigned as a host prefix (/32 or /128).
	Addr netip.Addr `json:"addr"`
	// MTU of the TUN interface.
	MTU int `json:"mtu"`
	// Routes are routed through the TUN interface.
	Routes []netip.Prefix `json:"routes,omitempty"`
	// ServiceAddr, if valid, gets a host route through the TUN interface
	// (the in-tunnel DNS/API address).
	ServiceAddr netip.Addr `json:"serviceAddr,omitzero"`
	// DefaultRoute adds a default route through the TUN interface for the
	// address family of Addr (tests; a later host-NAT interface will own
	// the default route otherwise).
	DefaultRoute bool `json:"defaultRoute,omitempty"`
	// HostTun, if set, names a second TUN interface that carries the
	// default route (the host NAT); it has no address of its own, routes
	// use Addr as their source. HostRoutes are routed through it too.
	HostTun    string         `json:"hostTun,omitempty"`
	HostRoutes []netip.Prefix `json:"hostRoutes,omitempty"`
	// DNS is written to the namespace's /etc/resolv.conf. A zero DNS leaves
	// /etc/resolv.conf alone.
	DNS DNS `json:"dns"`
	// Hostname, if set, is the UTS hostname (the parent then also creates a
	// UTS namespace).
	Hostname string `json:"hostname,omitempty"`
	// Argv is the job's command line; Argv[0] is looked up in PATH.
	Argv []string `json:"argv"`
}

// DNS is the content of a resolv.conf.
type DNS struct {
	Nameservers []netip.Addr `json:"nameservers,omitempty"`
	Search      []string     `json:"search,omitempty"`
	// Ndots is written as "options ndots:N" when positive.
	Ndots int `json:"ndots,omitempty"`
	// Options are further resolv.conf options ("edns0", "timeout:2", ...).
	Options []string `json:"options,omitempty"`
}

// IsZero reports whether d configures nothing.
func (d DNS) IsZero() bool {
	return len(d.Nameservers) == 0 && len(d.Search) == 0 && d.Ndots == 0 && len(d.Options) == 0
}

// Ready reports that the namespace is set up; the message carries the TUN
// file descriptor.
type Ready struct {
	TunName string `json:"tunName"`
}

// Error kinds the parent maps to sentinel errors.
const (
	KindTunPermission = "tun-permission"
	KindTunMissing    = "tun-missing"
	KindMount         = "mount"
	KindOther         = "other"
)

// Error reports that the child could not set up the namespace. Message is
// complete and says what to do; Kind lets the parent classify it.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// ProbeResult is what the doctor probe (ProbeArg) prints on stdout as JSON: for each
// step, the empty string when it worked or the error text.
type ProbeResult struct {
	PID1  bool   `json:"pid1"`
	Mount string `json:"mount"`
	TUN   string `json:"tun"`
	Proc  string `json:"proc"`
}
