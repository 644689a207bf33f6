package netstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// Flow describes one forwarded flow as seen inside the tunnel.
type Flow struct {
	Network  string         // "tcp", "udp" or "icmp"
	Src, Dst netip.AddrPort // Src is the tunnel peer's address; for icmp the ports are 0
}

// Dialer re-dials a flow outside the stack (the pod's or the host's
// sockets). It may rewrite the destination. It must honour ctx, which carries
// ForwarderConfig.DialTimeout and is cancelled by Close, and be safe for
// concurrent use. For "udp" it returns a connected datagram conn whose Read
// and Write carry one datagram each.
type Dialer func(ctx context.Context, f Flow) (net.Conn, error)

// Policy decides before dialing; a non-nil error refuses the flow. If the
// error wraps *Denied its Reason is the counter label, else "policy". It must
// be fast and safe for concurrent use: for UDP and ICMP it runs on the packet
// path (the goroutine calling Write).
type Policy func(f Flow) error

// NetDialer adapts a net.Dialer: it dials f.Network to f.Dst. A nil d is a
// zero net.Dialer.
func NetDialer(d *net.Dialer) Dialer {
	if d == nil {
		d = &net.Dialer{}
	}
	return func(ctx context.Context, f Flow) (net.Conn, error) {
		return d.DialContext(ctx, f.Network, f.Dst.String())
	}
}

// ForwarderConfig configures Forward. Zero values take the defaults.
type ForwarderConfig struct {
	Dial                 Dialer        // required
	Policy               Policy        // nil = allow all
	DialTimeout          time.Duration // default 10s; also bounds an echo relay
	MaxInFlight          int           // concurrent dials (and echo relays) in progress, all sources (default 512)
	MaxInFlightPerSource int           // per source IP (default 128)
	MaxFlows             int           // TCP flows + UDP sessions, from admission to end, all sources (default 16384)
	MaxFlowsPerSource    int           // per source IP (default 4096)
	UDPIdleTimeout       time.Duration // default 60s
	ICMPEcho             bool          // forward ICMP echo to non-local destinations with unprivileged ping sockets
}

// Defaults of ForwarderConfig.
const (
	DefaultDialTimeout          = 10 * time.Second
	DefaultMaxInFlight          = 512
	DefaultMaxInFlightPerSource = 128
	DefaultMaxFlows             = 16384
	DefaultMaxFlowsPerSource    = 4096
	DefaultUDPIdleTimeout       = 60 * time.Second
)

// gvisorMaxInFlight is gVisor's own cap on pending TCP forwarder requests.
// Over it gVisor drops SYNs silently and uncounted, so it is kept far above
// our caps, which answer with a RST and count.
const gvisorMaxInFlight = 1 << 16

// withDefaults validates c and fills in zero values.
func (c ForwarderConfig) withDefaults() (ForwarderConfig, error) {
	if c.Dial == nil {
		return c, errors.New("no dialer: ForwarderConfig.Dial is required")
	}
	if c.DialTimeout < 0 || c.UDPIdleTimeout < 0 || c.MaxInFlight < 0 ||
		c.MaxInFlightPerSource < 0 || c.MaxFlows < 0 || c.MaxFlowsPerSource < 0 {
		return c, errors.New("timeouts and limits must not be negative")
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.UDPIdleTimeout, DefaultUDPIdleTimeout)
	def(&c.MaxInFlight, DefaultMaxInFlight)
	def(&c.MaxInFlightPerSource, DefaultMaxInFlightPerSource)
	def(&c.MaxFlows, DefaultMaxFlows)
	def(&c.MaxFlowsPerSource, DefaultMaxFlowsPerSource)
	return c, nil
}

func def[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// forwarder terminates flows to destinations the stack does not own.
type forwarder struct {
	s        *Stack
	cfg      ForwarderConfig
	inFlight *quota
	flows    *quota
	tcp      *tcp.Forwarder
	udp      *udp.Forwarder

	icmpWarn sync.Once // logs "icmp_unavailable" once
}

// Forward installs TCP, UDP (and ICMP echo if asked) forwarders for packets
// addressed to destinations the stack does not own (the NIC becomes
// promiscuous). Call it at most once, before traffic. Flows to owned
// addresses still go to listeners first; a TCP SYN to an owned address with
// no listener gets a RST and a UDP datagram an ICMP port unreachable.
func (s *Stack) Forward(cfg ForwarderConfig) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return fmt.Errorf("netstack: forward: %w", err)
	}
	f := &forwarder{
		s:        s,
		cfg:      cfg,
		inFlight: newQuota(cfg.MaxInFlight, cfg.MaxInFlightPerSource),
		flows:    newQuota(cfg.MaxFlows, cfg.MaxFlowsPerSource),
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("netstack: forward: %w", net.ErrClosed)
	}
	if !s.fwd.CompareAndSwap(nil, f) {
		return errors.New("netstack: forward: already installed")
	}
	// rcvWnd 0: the handshake advertises the stack's default receive buffer.
	f.tcp = tcp.NewForwarder(s.ip, 0, gvisorMaxInFlight, f.handleTCP)
	f.udp = udp.NewForwarder(s.ip, f.handleUDP)
	s.ip.SetTransportProtocolHandler(tcp.ProtocolNumber, f.tcpPacket)
	s.ip.SetTransportProtocolHandler(udp.ProtocolNumber, f.udpPacket)
	s.enablePromiscuous()
	return nil
}

// tcpPacket receives TCP segments no endpoint claimed. Segments to owned
// addresses are left to the stack (RST); the rest go to gVisor's forwarder,
// which calls handleTCP once per new SYN.
func (f *forwarder) tcpPacket(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
	if f.s.owns(fromTCPIPAddr(id.LocalAddress)) {
		return false
	}
	return f.tcp.HandlePacket(id, pkt)
}

// udpPacket receives datagrams no endpoint claimed, like tcpPacket.
func (f *forwarder) udpPacket(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
	if f.s.owns(fromTCPIPAddr(id.LocalAddress)) {
		return false
	}
	return f.udp.HandlePacket(id, pkt)
}

// admit applies the policy and the caps to a new flow. withFlow also takes a
// flow unit (TCP and UDP; an echo relay only takes an in-flight unit).
// Refusals are counted and logged at debug level; the reason is returned
// with a nil ticket.
func (f *forwarder) admit(fl Flow, withFlow bool) (*ticket, string) {
	if reason := f.check(fl); reason != "" {
		f.refuse(fl, reason)
		return nil, reason
	}
	src := fl.Src.Addr()
	if !f.inFlight.acquire(src) {
		f.refuse(fl, reasonLimitInFlight)
		return nil, reasonLimitInFlight
	}
	t := &ticket{f: f, src: src, dialing: true}
	if withFlow {
		if !f.flows.acquire(src) {
			t.release()
			f.refuse(fl, reasonLimitFlows)
			return nil, reasonLimitFlows
		}
		t.flow = true
	}
	return t, ""
}

// check runs the policy and returns the refusal reason, or "".
func (f *forwarder) check(fl Flow) string {
	if f.cfg.Policy == nil {
		return ""
	}
	err := f.cfg.Policy(fl)
	if err == nil {
		return ""
	}
	var d *Denied
	if errors.As(err, &d) && d.Reason != "" {
		return d.Reason
	}
	return reasonPolicy
}

// refuse counts a refused flow.
func (f *forwarder) refuse(fl Flow, reason string) {
	f.s.stats.deny(reason)
	f.s.log.Debug("netstack: flow refused", "network", fl.Network, "src", fl.Src, "dst", fl.Dst, "reason", reason)
}

// dial re-dials fl outside within DialTimeout and returns the ticket's
// in-flight unit. Failures are counted by cause.
func (f *forwarder) dial(t *ticket, fl Flow) (net.Conn, bool) {
	defer t.dialDone()
	ctx, cancel := context.WithTimeout(f.s.ctx, f.cfg.DialTimeout)
	defer cancel()
	c, err := f.cfg.Dial(ctx, fl)
	if err == nil {
		return c, true
	}
	f.refuse(fl, dialFailure(ctx, err))
	f.s.log.Debug("netstack: forward dial failed", "network", fl.Network, "dst", fl.Dst, "err", err)
	return nil, false
}

// dialFailure classifies a dial error as a refusal reason.
func dialFailure(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return reasonDialRefused
	case errors.Is(ctx.Err(), context.DeadlineExceeded),
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return reasonDialTimeout
	}
	return reasonDialError
}
