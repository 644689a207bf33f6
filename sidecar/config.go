package sidecar

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/policy"
)

// Config of a Sidecar. Zero values take the documented defaults.
type Config struct {
	// PathPrefix is prepended to every HTTP path ("/mesh" → /mesh/v1/mesh).
	PathPrefix string
	// Secret is the shared secret; the websocket credential derives from
	// it, and so do the WireGuard keys unless PrivateKey is set.
	Secret string
	// PrivateKey, if set, is the sidecar's WireGuard key and Peers lists
	// the peers explicitly (several jobs behind one shadow pod).
	PrivateKey identity.PrivateKey
	// Peers are the explicit peers; only with PrivateKey.
	Peers []Peer
	// PodIP is the pod's address, which the job takes in the mesh.
	PodIP netip.Addr
	// ServiceAddr is the in-tunnel address of DNS and the config API.
	ServiceAddr netip.Addr
	// Routes are what the job sends through the mesh.
	Routes []netip.Prefix
	// Expose lists pod ports forwarded to the job.
	Expose []Port
	// ListenPort is the HTTP listener's port, if known; an exposed TCP
	// port may not be the same.
	ListenPort uint16
	// Allow and Deny narrow the egress policy (see package policy).
	Allow, Deny []policy.Rule
	// ResolvConf is the pod's resolver file (default /etc/resolv.conf).
	ResolvConf string
	// MTU of the tunnel (default netstack.DefaultMTU).
	MTU int
	// ShutdownGrace bounds the drain of established flows on shutdown.
	ShutdownGrace time.Duration
	// Limits of the egress forwarder; zero fields take netstack's defaults.
	Limits netstack.ForwarderConfig
	// TCPBufferBudget is the memory the send and receive buffers of all
	// the netstack's TCP connections share (netstack.Config.BufferBudget);
	// 0 is netstack.DefaultBufferBudget.
	TCPBufferBudget int
	// MaxIngress caps concurrent ingress connections and UDP sessions.
	MaxIngress int
	// Version is reported in status.
	Version string
	// Logger receives events; nil discards them.
	Logger *slog.Logger

	// dial replaces the pod dialer in tests that cannot reach real
	// destinations other than loopback; the policy still runs first.
	dial netstack.Dialer
}

// Peer is an explicitly configured WireGuard peer.
type Peer struct {
	PublicKey identity.PublicKey
	// Addr is the peer's address in the mesh; it may be left unset for a
	// single peer, which then takes the pod IP.
	Addr netip.Addr
}

// ParsePeer parses "PUBKEY[=ADDR]" (the key in base64, as wg(8) prints
// it: 44 characters ending in "=", so the separator is the 45th).
func ParsePeer(s string) (Peer, error) {
	s = strings.TrimSpace(s)
	const keyLen = 44
	key, addr := s, ""
	if len(s) > keyLen && s[keyLen] == '=' {
		key, addr = s[:keyLen], s[keyLen+1:]
	}
	pk, err := identity.ParsePublicKey(key)
	if err != nil {
		return Peer{}, fmt.Errorf("peer %q: want PUBKEY[=ADDR] with a base64 WireGuard public key: %w", s, err)
	}
	p := Peer{PublicKey: pk}
	if addr != "" {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return Peer{}, fmt.Errorf("peer %q: %q is not an IP address", s, addr)
		}
		p.Addr = a.Unmap()
	}
	return p, nil
}

// Port is an exposed pod port.
type Port struct {
	Num   uint16
	Proto string // "tcp" or "udp"
}

func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Num, p.Proto) }

// ParsePort parses "8080", "8080/tcp" or "53/udp".
func ParsePort(s string) (Port, error) {
	num, proto, found := strings.Cut(strings.TrimSpace(s), "/")
	if !found {
		proto = "tcp"
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n == 0 {
		return Port{}, fmt.Errorf("exposed port %q: want PORT[/tcp|/udp] with PORT in 1-65535", s)
	}
	if proto != "tcp" && proto != "udp" {
		return Port{}, fmt.Errorf("exposed port %q: protocol %q is not tcp or udp", s, proto)
	}
	return Port{Num: uint16(n), Proto: proto}, nil
}

const (
	defaultShutdownGrace = 25 * time.Second // under Kubernetes' default 30 s termination grace
	defaultMaxIngress    = 4096
)

// normalize checks c and fills defaults; errors say what to change.
func (c *Config) normalize() error {
	var errs []error
	if _, err := identity.Derive(c.Secret); err != nil {
		errs = append(errs, fmt.Errorf("secret: %w", err))
	}
	errs = append(errs, c.normalizePeers()...)
	c.PodIP = c.PodIP.Unmap()
	if !c.PodIP.IsValid() || !c.PodIP.Is4() || c.PodIP.IsUnspecified() || c.PodIP.IsLoopback() {
		errs = append(errs, fmt.Errorf("pod IP %q: need the pod's IPv4 address (--pod-ip, or POD_IP from the downward API)", c.PodIP))
	}
	if !c.ServiceAddr.IsValid() {
		c.ServiceAddr = meshapi.DefaultServiceAddr
	}
	if c.ServiceAddr == c.PodIP {
		errs = append(errs, fmt.Errorf("service address %s must differ from the pod IP", c.ServiceAddr))
	}
	errs = append(errs, c.checkPeerAddrs()...)
	for _, p := range c.Expose {
		if p.Proto == "tcp" && p.Num == c.ListenPort {
			errs = append(errs, fmt.Errorf("exposed port %s is the HTTP listener's own port (--listen); expose another one", p))
		}
	}
	if c.MTU == 0 {
		c.MTU = netstack.DefaultMTU
	}
	if c.MTU < 1280 || c.MTU > netstack.DefaultMTU {
		errs = append(errs, fmt.Errorf("MTU %d out of range 1280-%d", c.MTU, netstack.DefaultMTU))
	}
	for _, r := range c.Routes {
		if r.Addr().Is6() {
			errs = append(errs, fmt.Errorf("route %s: IPv6 routes are not supported yet", r))
		}
	}
	if c.ResolvConf == "" {
		c.ResolvConf = "/etc/resolv.conf"
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = defaultShutdownGrace
	}
	if c.MaxIngress <= 0 {
		c.MaxIngress = defaultMaxIngress
	}
	if c.TCPBufferBudget < 0 {
		errs = append(errs, fmt.Errorf("negative TCP buffer budget %d", c.TCPBufferBudget))
	}
	c.PathPrefix = "/" + strings.Trim(c.PathPrefix, "/")
	if c.PathPrefix == "/" {
		c.PathPrefix = ""
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return errors.Join(errs...)
}

// normalizePeers checks explicit-key mode and, for a single peer without
// an address, gives it the pod IP (filled in by checkPeerAddrs).
func (c *Config) normalizePeers() []error {
	if c.PrivateKey.IsZero() {
		if len(c.Peers) > 0 {
			return []error{errors.New("peers given without the sidecar's private key (--private-key-file)")}
		}
		return nil
	}
	if len(c.Peers) == 0 {
		return []error{errors.New("a private key needs at least one --peer PUBKEY[=ADDR]")}
	}
	return nil
}

// checkPeerAddrs gives a lone peer the pod IP and checks that addresses
// are set, IPv4 and distinct.
func (c *Config) checkPeerAddrs() []error {
	if len(c.Peers) == 1 && !c.Peers[0].Addr.IsValid() {
		c.Peers[0].Addr = c.PodIP
	}
	var errs []error
	seen := map[netip.Addr]bool{}
	keys := map[identity.PublicKey]bool{}
	for _, p := range c.Peers {
		switch {
		case !p.Addr.IsValid():
			errs = append(errs, fmt.Errorf("peer %s: with several peers each needs =ADDR", p.PublicKey))
		case !p.Addr.Is4() || p.Addr == c.ServiceAddr:
			errs = append(errs, fmt.Errorf("peer %s: address %s must be IPv4 and not the service address", p.PublicKey, p.Addr))
		case seen[p.Addr]:
			errs = append(errs, fmt.Errorf("peer %s: address %s is used twice", p.PublicKey, p.Addr))
		case keys[p.PublicKey]:
			errs = append(errs, fmt.Errorf("peer %s is listed twice", p.PublicKey))
		}
		seen[p.Addr], keys[p.PublicKey] = true, true
	}
	return errs
}
