package child

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// linkUp sets the named link up.
func linkUp(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("child: find %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("child: set %s up: %w", name, err)
	}
	return nil
}

// configureTUN sets MTU, address, link up and routes of the TUN interface.
func configureTUN(cfg *messages.Config) error {
	link, err := netlink.LinkByName(cfg.TunName)
	if err != nil {
		return fmt.Errorf("child: find %s: %w", cfg.TunName, err)
	}
	if err := netlink.LinkSetMTU(link, cfg.MTU); err != nil {
		return fmt.Errorf("child: set %s mtu %d: %w", cfg.TunName, cfg.MTU, err)
	}
	// No IPv6 link-local address: it would only send router solicitations
	// and MLD reports into the tunnel. Best effort: a kernel without IPv6
	// refuses the attribute, and there is nothing to silence then.
	_ = netlink.LinkSetIP6AddrGenMode(link, in6AddrGenModeNone)
	host := netip.PrefixFrom(cfg.Addr, cfg.Addr.BitLen())
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet(host)}); err != nil {
		return fmt.Errorf("child: add address %s to %s: %w", host, cfg.TunName, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("child: set %s up: %w", cfg.TunName, err)
	}
	for _, dst := range routes(cfg) {
		if err := addRoute(link, dst, cfg.Addr); err != nil {
			return err
		}
	}
	return nil
}

// hostRouteMetric keeps the host NAT's default route below a mesh route to
// 0.0.0.0/0 (sending all egress through the pod), if the sidecar has one.
const hostRouteMetric = 100

// configureHostTUN brings up the host-NAT interface: MTU, up, a default
// route (and HostRoutes) with the pod IP as source. It has no address.
func configureHostTUN(cfg *messages.Config) error {
	link, err := netlink.LinkByName(cfg.HostTun)
	if err != nil {
		return fmt.Errorf("child: find %s: %w", cfg.HostTun, err)
	}
	if err := netlink.LinkSetMTU(link, cfg.MTU); err != nil {
		return fmt.Errorf("child: set %s mtu %d: %w", cfg.HostTun, cfg.MTU, err)
	}
	_ = netlink.LinkSetIP6AddrGenMode(link, in6AddrGenModeNone)
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("child: set %s up: %w", cfg.HostTun, err)
	}
	dsts := append([]netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 0)}, cfg.HostRoutes...)
	for _, dst := range dsts {
		r := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       ipNet(dst.Masked()),
			Scope:     netlink.SCOPE_LINK,
			Protocol:  unix.RTPROT_STATIC,
			Src:       net.IP(cfg.Addr.AsSlice()),
		}
		if dst.Bits() == 0 {
			r.Priority = hostRouteMetric
		}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("child: add route %s dev %s: %w", dst, cfg.HostTun, err)
		}
	}
	return nil
}

// routes lists every destination routed through the TUN interface.
func routes(cfg *messages.Config) []netip.Prefix {
	out := append([]netip.Prefix(nil), cfg.Routes...)
	if cfg.ServiceAddr.IsValid() {
		out = append(out, netip.PrefixFrom(cfg.ServiceAddr, cfg.ServiceAddr.BitLen()))
	}
	if cfg.DefaultRoute {
		out = append(out, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
		if cfg.Addr.Is6() {
			out[len(out)-1] = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
	}
	return out
}

// addRoute routes dst through link with src as the preferred source
// address (when the families match).
func addRoute(link netlink.Link, dst netip.Prefix, src netip.Addr) error {
	r := &netlink.Route{
		LinkIndex: link.Attrs().Index,
		Dst:       ipNet(dst.Masked()),
		Scope:     netlink.SCOPE_LINK,
		Protocol:  unix.RTPROT_STATIC,
	}
	if src.Is4() == dst.Addr().Is4() {
		r.Src = net.IP(src.AsSlice())
	}
	if err := netlink.RouteAdd(r); err != nil {
		return fmt.Errorf("child: add route %s dev %s: %w", dst, link.Attrs().Name, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// in6AddrGenModeNone is IN6_ADDR_GEN_MODE_NONE from linux/if_link.h.
const in6AddrGenModeNone = 1
