package netstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/tun"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// DefaultMTU is the link MTU used when Config.MTU is 0. The carrier is a TCP
// stream, so the inner MTU need not be 1420; it stays below wireguard-go's
// 65535-byte message buffer minus its headers. It may be retuned by
// measurement.
const DefaultMTU = 65000

const (
	minMTU     = 576   // smallest datagram every IPv4 host must accept (RFC 791)
	minMTUIPv6 = 1280  // IPv6 minimum link MTU (RFC 8200)
	maxMTU     = 65535 // largest IP packet

	nicID tcpip.NICID = 1

	// linkQueueLen bounds the packets waiting for Read. When it is full the
	// stack drops and TCP retransmits; 512 large packets is ~32 MiB at most.
	linkQueueLen = 512
)

// Config of a Stack.
type Config struct {
	// Addrs are the addresses the stack owns (IPv4 and/or IPv6). It answers
	// ICMP echo for them and callers may listen on them. IPv4-mapped IPv6
	// addresses are taken as IPv4.
	Addrs []netip.Addr
	// MTU is the link MTU; 0 means DefaultMTU. It must be within 576..65535,
	// and at least 1280 if any address is IPv6.
	MTU int
	// BufferBudget is the memory, in bytes, that the send and receive
	// buffers of all the stack's TCP connections share; 0 means
	// DefaultBufferBudget. Each connection gets at most gVisor's
	// auto-tuning (up to 6 MiB send, 8 MiB receive) and at least 32 KiB
	// send and 128 KiB receive, however many there are.
	BufferBudget int
	// Logger receives the stack's logs; nil discards them.
	Logger *slog.Logger
}

// Stack is a userspace TCP/IP stack that is also a tun.Device. See the package
// documentation for its concurrency and lifecycle contract.
type Stack struct {
	log    *slog.Logger
	mtu    int
	owned  map[netip.Addr]struct{} // immutable after New
	hasV6  bool                    // an IPv6 route exists (MTU >= 1280)
	ip     *stack.Stack
	link   *channel.Endpoint
	events chan tun.Event
	budget *bufBudget // TCP buffer limits of the conns handed out

	ctx    context.Context // alive until Close
	cancel context.CancelFunc

	// ioMu orders Write against Close: Write injects under the read lock,
	// Close takes the write lock to stop injection before tearing down.
	ioMu sync.RWMutex

	mu      sync.Mutex
	closed  bool                      // guarded by mu
	closers map[*[]io.Closer]struct{} // forwarded conns, guarded by mu
	wg      sync.WaitGroup            // owned goroutines; Add only under mu while !closed

	promiscOnce sync.Once
	fwd         atomic.Pointer[forwarder] // set once by Forward
	stats       counters
	closeOnce   sync.Once
}

// New creates a Stack with one NIC carrying cfg.Addrs and default routes for
// every address family it can carry. It sends tun.EventUp on Events once.
func New(cfg Config) (*Stack, error) {
	mtu, owned, err := validate(cfg)
	if err != nil {
		return nil, fmt.Errorf("netstack: new: %w", err)
	}
	s := &Stack{
		log:     cfg.Logger,
		mtu:     mtu,
		owned:   owned,
		hasV6:   mtu >= minMTUIPv6,
		link:    channel.New(linkQueueLen, uint32(mtu), ""),
		events:  make(chan tun.Event, 1),
		closers: make(map[*[]io.Closer]struct{}),
		budget:  newBufBudget(cmp.Or(cfg.BufferBudget, DefaultBufferBudget)),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.ip = stack.New(stack.Options{
		// Loopback destinations arriving from the tunnel are let in so the
		// forwarders' policy sees, refuses and counts them; gVisor would
		// otherwise drop them silently and the job would hang in connect.
		NetworkProtocols: []stack.NetworkProtocolFactory{
			ipv4.NewProtocolWithOptions(ipv4.Options{AllowExternalLoopbackTraffic: true}),
			ipv6.NewProtocolWithOptions(ipv6.Options{AllowExternalLoopbackTraffic: true}),
		},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
		// HandleLocal stays off: with a promiscuous NIC gVisor would take
		// every packet's source for one of its own and drop it as a martian.
		// Traffic between the stack's own addresses therefore goes through
		// the tunnel like any other.
		HandleLocal: false,
	})
	if err := s.configure(); err != nil {
		s.ip.Close()
		s.ip.Wait()
		return nil, fmt.Errorf("netstack: new: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.events <- tun.EventUp
	return s, nil
}

// validate checks cfg and returns the effective MTU and the owned set.
func validate(cfg Config) (int, map[netip.Addr]struct{}, error) {
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if mtu < minMTU || mtu > maxMTU {
		return 0, nil, fmt.Errorf("mtu %d out of range %d..%d", cfg.MTU, minMTU, maxMTU)
	}
	if cfg.BufferBudget < 0 {
		return 0, nil, fmt.Errorf("negative buffer budget %d", cfg.BufferBudget)
	}
	owned := make(map[netip.Addr]struct{}, len(cfg.Addrs))
	for _, a := range cfg.Addrs {
		a = a.Unmap()
		switch {
		case !a.IsValid():
			return 0, nil, errors.New("invalid (zero) address in Addrs")
		case a.IsUnspecified() || a.IsMulticast():
			return 0, nil, fmt.Errorf("address %v cannot be owned: unspecified or multicast", a)
		case a.Zone() != "":
			return 0, nil, fmt.Errorf("address %v: zones are not supported", a)
		case a.Is6() && mtu < minMTUIPv6:
			return 0, nil, fmt.Errorf("mtu %d is below the IPv6 minimum %d required by address %v", mtu, minMTUIPv6, a)
		}
		if _, dup := owned[a]; dup {
			return 0, nil, fmt.Errorf("address %v listed twice", a)
		}
		owned[a] = struct{}{}
	}
	return mtu, owned, nil
}

// configure sets the stack options, creates the NIC and its addresses and
// routes.
func (s *Stack) configure() error {
	if err := setTCPOptions(s.ip); err != nil {
		return err
	}
	if err := s.ip.CreateNIC(nicID, s.link); err != nil {
		return fmt.Errorf("create nic: %w", convertError(err))
	}
	// DialTCP/DialUDP may bind any source address: ingress keeps the
	// original client address as the source the job sees.
	if err := s.ip.SetSpoofing(nicID, true); err != nil {
		return fmt.Errorf("enable spoofing: %w", convertError(err))
	}
	for a := range s.owned {
		pa := tcpip.ProtocolAddress{Protocol: protoOf(a), AddressWithPrefix: toTCPIPAddr(a).WithPrefix()}
		if err := s.ip.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
			return fmt.Errorf("add address %v: %w", a, convertError(err))
		}
	}
	// Everything not owned is reached through the tunnel.
	routes := []tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nicID}}
	if s.hasV6 {
		routes = append(routes, tcpip.Route{Destination: header.IPv6EmptySubnet, NIC: nicID})
	}
	s.ip.SetRouteTable(routes)
	return nil
}

// Buffer sizes for TCP endpoints (gVisor's tcp_rmem/tcp_wmem). The defaults
// keep ~1 MiB in flight per flow; auto-tuning may grow a busy flow up to the
// maximum for high bandwidth-delay paths while idle flows stay small.
const (
	tcpRecvBufDefault = 1 << 20
	tcpRecvBufMax     = 8 << 20
	tcpSendBufDefault = 1 << 20
	tcpSendBufMax     = 6 << 20
)

// setTCPOptions applies the transport options; each carries its reason.
func setTCPOptions(ip *stack.Stack) error {
	sack := tcpip.TCPSACKEnabled(true)                     // recover several losses per RTT; gVisor's default is off
	recovery := tcpip.TCPRecovery(0)                       // RACK loss detection retransmits spuriously in gVisor (tailscale#9707)
	cc := tcpip.CongestionControlOption("reno")            // cubic overflows the sender's cwnd arithmetic (gvisor#11632); pin it
	moderate := tcpip.TCPModerateReceiveBufferOption(true) // auto-tune receive windows to the measured rate
	// TIME_WAIT of 1 s instead of 60: gVisor passes a new SYN for a 4-tuple
	// in TIME_WAIT only to a listener, never to a forwarder, so a job whose
	// kernel reused a source port soon after the destination closed first
	// had its connect dropped for a minute (TestTCPForwardReusedSourcePort).
	timeWait := tcpip.TCPTimeWaitTimeoutOption(time.Second)
	// ~1 MiB windows per flow by default, auto-tuned up to 8 MiB (receive)
	// and 6 MiB (send) for high bandwidth-delay tunnels.
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: tcpRecvBufDefault, Max: tcpRecvBufMax}
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: tcpSendBufDefault, Max: tcpSendBufMax}
	opts := []tcpip.SettableTransportProtocolOption{&sack, &recovery, &cc, &moderate, &timeWait, &rcv, &snd}
	for _, o := range opts {
		if err := ip.SetTransportProtocolOption(tcp.ProtocolNumber, o); err != nil {
			return fmt.Errorf("set tcp option %T: %w", o, convertError(err))
		}
	}
	return nil
}

// enablePromiscuous makes the NIC accept packets for any destination. It is
// needed by forwarders and by spoofed dials, whose replies are addressed to
// an address the stack does not own.
func (s *Stack) enablePromiscuous() {
	s.promiscOnce.Do(func() {
		if err := s.ip.SetPromiscuousMode(nicID, true); err != nil {
			s.log.Error("netstack: enable promiscuous mode", "err", convertError(err))
		}
	})
}

// owns reports whether a is one of Config.Addrs.
func (s *Stack) owns(a netip.Addr) bool {
	_, ok := s.owned[a.Unmap()]
	return ok
}

// Close stops the stack: it stops packet injection, cancels every dial and
// relay, closes forwarded flows, aborts every endpoint, waits for every owned
// goroutine and closes the Events channel. It is idempotent and always
// returns nil.
func (s *Stack) Close() error {
	s.closeOnce.Do(s.shutdown)
	return nil
}

func (s *Stack) shutdown() {
	s.ioMu.Lock() // no Write is injecting, and none will after cancel
	s.cancel()
	s.mu.Lock()
	s.closed = true
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	s.ioMu.Unlock()

	for set := range closers {
		for _, c := range *set {
			c.Close()
		}
	}
	s.ip.Close()
	s.waitOwned()
	s.ip.Wait()
	s.link.Close()
	close(s.events)
}

// waitOwned waits for owned goroutines. A forwarder may create an endpoint
// after ip.Close took its snapshot (a TCP handshake then blocks until it
// completes), so endpoints are aborted again until everything has returned.
func (s *Stack) waitOwned() {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			for _, ep := range s.ip.RegisteredEndpoints() {
				ep.Abort()
			}
		}
	}
}

// enter registers an owned goroutine (or a section that Close must wait for).
// It returns false once the stack is closing; the caller must not proceed.
func (s *Stack) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// leave ends what enter started.
func (s *Stack) leave() { s.wg.Done() }

// goOwned runs fn on a goroutine Close waits for. It returns false, without
// running fn, once the stack is closing.
func (s *Stack) goOwned(fn func()) bool {
	if !s.enter() {
		return false
	}
	go func() {
		defer s.leave()
		fn()
	}()
	return true
}

// track registers conns that Close must close; the returned func unregisters
// them. If the stack is already closing they are closed at once.
func (s *Stack) track(cs ...io.Closer) (untrack func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, c := range cs {
			c.Close()
		}
		return func() {}
	}
	set := &cs
	s.closers[set] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.closers, set)
	}
}
