package hostnat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/tun"

	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/policy"
)

// LoopbackAddr is the in-namespace address that stands for the host's
// 127.0.0.1 when loopback access is allowed.
var LoopbackAddr = netip.MustParseAddr("169.254.64.2")

// Config of a NAT.
type Config struct {
	// TUN is the job's host-network interface (the kernel TUN's device).
	TUN tun.Device
	// MTU of the netstack; the TUN's MTU if zero.
	MTU int
	// AllowLoopback lets the job reach the host's 127.0.0.1 at LoopbackAddr.
	AllowLoopback bool
	// Limits of the forwarders; zero fields take netstack's defaults.
	Limits netstack.ForwarderConfig
	// Logger receives events; nil discards them.
	Logger *slog.Logger
}

// NAT is a running host NAT.
type NAT struct {
	stack  *netstack.Stack
	tun    tun.Device
	policy *policy.Policy
	cfg    Config
	log    *slog.Logger

	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Start builds the netstack and starts moving packets.
func Start(cfg Config) (*NAT, error) {
	if cfg.TUN == nil {
		return nil, errors.New("hostnat: no TUN")
	}
	if cfg.MTU == 0 {
		mtu, err := cfg.TUN.MTU()
		if err != nil {
			return nil, fmt.Errorf("hostnat: TUN MTU: %w", err)
		}
		cfg.MTU = mtu
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := netstack.New(netstack.Config{MTU: cfg.MTU, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("hostnat: %w", err)
	}
	n := &NAT{stack: st, tun: cfg.TUN, cfg: cfg, log: log, policy: newPolicy(cfg.AllowLoopback)}
	fc := cfg.Limits
	fc.Policy, fc.Dial, fc.ICMPEcho = n.check, n.dial, true
	if err := st.Forward(fc); err != nil {
		st.Close()
		return nil, fmt.Errorf("hostnat: %w", err)
	}
	n.wg.Go(func() { n.pump("tun->netstack", cfg.TUN, st) })
	n.wg.Go(func() { n.pump("netstack->tun", st, cfg.TUN) })
	return n, nil
}

// newPolicy denies the built-in classes; a loopback allow maps the
// stand-in address (see dial), so only that address is lifted.
func newPolicy(loopback bool) *policy.Policy {
	var cfg policy.Config
	if loopback {
		cfg.Allow = []policy.Rule{
			{Prefix: netip.PrefixFrom(LoopbackAddr, 32)},
			{Prefix: netip.MustParsePrefix("0.0.0.0/0")},
			{Prefix: netip.MustParsePrefix("::/0")},
		}
	}
	return policy.New(cfg)
}

// check applies the policy; the loopback stand-in is decided here, since
// it is a link-local address the policy denies.
func (n *NAT) check(f netstack.Flow) error {
	if f.Dst.Addr() == LoopbackAddr {
		if n.cfg.AllowLoopback {
			return nil
		}
		return &netstack.Denied{Reason: policy.ReasonLoopback}
	}
	if err := n.policy.Check(f.Network, f.Dst); err != nil {
		var d *policy.Denial
		if errors.As(err, &d) {
			return &netstack.Denied{Reason: d.Reason}
		}
		return err
	}
	return nil
}

// dial re-dials a flow from the host, mapping the loopback stand-in.
func (n *NAT) dial(ctx context.Context, f netstack.Flow) (net.Conn, error) {
	dst := f.Dst
	if dst.Addr() == LoopbackAddr {
		dst = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), dst.Port())
	}
	d := net.Dialer{KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, f.Network, dst.String())
}

// DialJob opens a connection from the host side into the namespace, to
// dst (the job's address and port), for published ports. The job sees it
// coming from LoopbackAddr. network is "tcp" or "udp".
func (n *NAT) DialJob(ctx context.Context, network string, dst netip.AddrPort) (net.Conn, error) {
	src := netip.AddrPortFrom(LoopbackAddr, 0)
	if network == "udp" {
		return n.stack.DialUDP(src, dst)
	}
	return n.stack.DialTCP(ctx, src, dst)
}

// Stats are the forwarders' counters.
func (n *NAT) Stats() netstack.Stats { return n.stack.Stats() }

// Close stops the pumps and closes the netstack and the TUN; idempotent.
func (n *NAT) Close() error {
	n.closeOnce.Do(func() {
		n.stack.Close()
		n.tun.Close()
		n.wg.Wait()
	})
	return nil
}
