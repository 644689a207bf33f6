package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/meshlaunch/meshlaunch/netstack"
	"github.com/meshlaunch/meshlaunch/policy"
)

// reasonDraining refuses new egress flows while the sidecar shuts down.
const reasonDraining = "shutting_down"

// reasonSpoofed counts packets whose source is not the sending peer's.
const reasonSpoofed = "spoofed_source"

// errDraining refuses new tunnel dials while the sidecar shuts down.
var errDraining = errors.New("sidecar shutting down")

// forwarderConfig is the egress NAT: the job's flows leave from the pod's
// sockets after the policy allows them.
func (s *Sidecar) forwarderConfig() netstack.ForwarderConfig {
	fc := s.cfg.Limits
	fc.Policy = s.checkFlow
	fc.Dial = s.dialEgress
	if s.cfg.dial != nil {
		fc.Dial = s.cfg.dial
	}
	fc.ICMPEcho = true
	return fc
}

// checkFlow runs before the forwarder dials: the source must be the peer
// (no spoofing from the job), the destination must pass the policy.
func (s *Sidecar) checkFlow(f netstack.Flow) error {
	if s.draining.Load() {
		return &netstack.Denied{Reason: reasonDraining}
	}
	if _, ok := s.byAddr[f.Src.Addr().Unmap()]; !ok {
		return &netstack.Denied{Reason: reasonSpoofed}
	}
	return asDenied(s.policy.Check(f.Network, f.Dst))
}

// asDenied maps a policy denial to the forwarder's counted reason.
func asDenied(err error) error {
	var d *policy.Denial
	if errors.As(err, &d) {
		return &netstack.Denied{Reason: d.Reason}
	}
	return err
}

// dialEgress dials from the pod. The policy is checked again on the
// address the kernel is about to connect to, so nothing between the
// check and the dial can redirect a flow.
func (s *Sidecar) dialEgress(ctx context.Context, f netstack.Flow) (net.Conn, error) {
	d := net.Dialer{
		Timeout:   s.cfg.Limits.DialTimeout,
		KeepAlive: 30 * time.Second,
		Control:   s.controlDial,
	}
	return d.DialContext(ctx, f.Network, f.Dst.String())
}

func (s *Sidecar) controlDial(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("sidecar: dial-time policy: address %q: %w", address, err)
	}
	proto := "tcp"
	if len(network) >= 3 && network[:3] == "udp" {
		proto = "udp"
	}
	return s.policy.Check(proto, ap)
}
