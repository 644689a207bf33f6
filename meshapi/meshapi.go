// Package meshapi is the contract between the sidecar and its clients
// (the launcher, the tunnel, `meshlaunch status`): URL paths, the in-tunnel
// service address, and the JSON documents served there. It holds types
// and constants only, so both sides can import it without importing each
// other.
package meshapi

import (
	"net/netip"
	"time"
)

// Paths under the sidecar's path prefix on its HTTP listener.
const (
	// MeshPath is the websocket endpoint carrying WireGuard.
	MeshPath = "/v1/mesh"
	// StatusPath serves Status as JSON; it needs the bearer credential.
	StatusPath = "/v1/status"
	// ConfigPath serves JobConfig as JSON, on the listener (with the
	// bearer credential, so a launcher learns its configuration before
	// the tunnel exists) and on the in-tunnel service address.
	ConfigPath = "/v1/config"
)

// DefaultServiceAddr is the sidecar's own address inside the tunnel: DNS
// on port 53 and the config API on port 80. It is link-local, so it never
// collides with a cluster's pod or Service ranges and is never routed off
// the job's TUN.
var DefaultServiceAddr = netip.MustParseAddr("169.254.64.1")

// JobConfig is what a launcher needs to set up the job's network; it
// learns everything but the server URL and the secret from here.
type JobConfig struct {
	// Address is the job's address in the mesh: the pod IP.
	Address netip.Addr `json:"address"`
	// Routes are sent through the mesh; 0.0.0.0/0 means everything.
	Routes []netip.Prefix `json:"routes"`
	// MTU of the job's TUN interface.
	MTU int `json:"mtu"`
	// DNS is the resolver configuration for the job's resolv.conf.
	DNS DNSConfig `json:"dns"`
	// Expose lists the pod ports forwarded to the job ("8080/tcp").
	Expose []string `json:"expose,omitempty"`
	// ServiceAddr is the in-tunnel service address.
	ServiceAddr netip.Addr `json:"serviceAddr"`
	// SidecarKey is the sidecar's WireGuard public key (base64). A
	// launcher with its own key (explicit peers) needs it; one whose keys
	// derive from the secret derives it too.
	SidecarKey string `json:"sidecarKey,omitempty"`
}

// PeerHeader names a client's WireGuard public key (base64) on the config
// request and the websocket upgrade, for a sidecar with explicit peers:
// the sidecar answers each peer with its own address, and the sessions of
// different peers do not replace each other. It is a claim, not a proof:
// any holder of the credential may claim any peer's key; WireGuard's
// handshake is what authenticates the traffic.
const PeerHeader = "Meshlaunch-Peer"

// DNSConfig is the pod's resolver view, served through the tunnel.
type DNSConfig struct {
	Nameserver netip.Addr `json:"nameserver"`
	Search     []string   `json:"search,omitempty"`
	Ndots      int        `json:"ndots"`
	Options    []string   `json:"options,omitempty"`
}

// Status is the sidecar's state for `meshlaunch status`.
type Status struct {
	Version      string            `json:"version"`
	Ready        bool              `json:"ready"`
	Draining     bool              `json:"draining"`
	PodIP        netip.Addr        `json:"podIP"`
	Uptime       Duration          `json:"uptime"`
	Peers        []PeerStatus      `json:"peers"`
	Flows        FlowStatus        `json:"flows"`
	Denied       map[string]uint64 `json:"denied,omitempty"`
	Sessions     int               `json:"sessions"`
	AuthFailures uint64            `json:"authFailures"`
}

// PeerStatus is one WireGuard peer.
type PeerStatus struct {
	PublicKey     string    `json:"publicKey"`
	Address       string    `json:"address"`
	Connected     bool      `json:"connected"`
	LastHandshake time.Time `json:"lastHandshake,omitzero"`
	RxBytes       uint64    `json:"rxBytes"`
	TxBytes       uint64    `json:"txBytes"`
}

// FlowStatus counts forwarded flows.
type FlowStatus struct {
	TCP      int    `json:"tcp"`
	UDP      int    `json:"udp"`
	InFlight int    `json:"inFlight"`
	Ingress  int    `json:"ingress"`
	TCPTotal uint64 `json:"tcpTotal"`
	UDPTotal uint64 `json:"udpTotal"`
}

// Duration marshals as a Go duration string ("1h2m3s").
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}
