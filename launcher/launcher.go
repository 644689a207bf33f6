// Package launcher is the parent half of `meshlaunch run`: it runs a job in
// new user, network, mount and PID namespaces with a TUN interface that
// carries the pod IP, and hands the TUN's file descriptor to the caller
// (which runs WireGuard on it in the host network namespace).
//
// The parent re-executes its own binary (/proc/self/exe) with
// os.Args[1] == messages.ChildArg; the program's main must therefore call
// child.MaybeRun (package launcher/child) before anything else. The user
// namespace maps only the caller's own uid and gid to themselves (no root
// inside, no newuidmap, no /etc/subuid); the child receives CAP_NET_ADMIN
// and CAP_SYS_ADMIN in the new namespace as ambient capabilities, uses them
// to configure the namespace, and drops every capability before it execs the
// job. Parent and child talk only through package launcher/messages.
//
// Lifecycle: Start sets the namespace up and returns a Job holding the TUN
// file; the caller brings the tunnel up, then calls Go to start the job and
// Wait for its exit code. Cancelling Start's context, or a terminating
// signal, sends SIGTERM to the job and SIGKILL to the namespace after
// Config.KillGrace. When the parent dies, even by SIGKILL, the child gets
// SIGKILL (parent-death signal) and with it every process in the PID
// namespace.
package launcher

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// DNS is the namespace's resolv.conf content.
type DNS = messages.DNS

// Defaults for zero Config fields.
const (
	DefaultTunName   = "ml0"
	DefaultMTU       = 1420
	DefaultKillGrace = 10 * time.Second
)

// Config describes the namespace and the job's surroundings. Addr is
// required; every other zero field takes a default or means "none".
type Config struct {
	// Addr is the pod IP assigned to the TUN interface as a host prefix.
	Addr netip.Addr
	// TunName is the TUN interface name; "" means DefaultTunName.
	TunName string
	// MTU of the TUN interface; 0 means DefaultMTU.
	MTU int
	// Routes are routed through the TUN interface.
	Routes []netip.Prefix
	// ServiceAddr, if valid, gets a host route through the TUN interface.
	ServiceAddr netip.Addr
	// DefaultRoute routes everything through the TUN interface (tests, or
	// no host NAT).
	DefaultRoute bool
	// HostTun, if set, names a second TUN interface that takes the
	// default route (the host NAT); HostRoutes go through it too.
	HostTun    string
	HostRoutes []netip.Prefix
	// DNS is bind-mounted over /etc/resolv.conf; zero leaves it alone.
	DNS DNS
	// Hostname, if set, puts the job in a new UTS namespace with this name.
	Hostname string

	// Env is the job's environment (MESHLAUNCH_POD_IP is added); nil means
	// os.Environ().
	Env []string
	// Dir is the job's working directory; "" means the current one.
	Dir string
	// Stdin, Stdout, Stderr are passed to the job as they are (a terminal
	// stays the job's terminal); nil means the launcher's own.
	Stdin, Stdout, Stderr *os.File

	// ForwardSignals relays SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and
	// SIGUSR2 received by this process to the job (cmd sets it; tests that
	// run in-process leave it off).
	ForwardSignals bool
	// KillGrace is how long the job has to exit after a terminating signal
	// before the namespace is killed; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// Logger receives lifecycle events; nil discards them.
	Logger *slog.Logger
}

// withDefaults returns c with defaults applied, or an error naming the bad
// field.
func (c Config) withDefaults() (Config, error) {
	if c.TunName == "" {
		c.TunName = DefaultTunName
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, c.validate()
}

func (c Config) validate() error {
	switch {
	case !c.Addr.IsValid():
		return errors.New("launcher: config: pod address is required")
	case len(c.TunName) > 15:
		return fmt.Errorf("launcher: config: interface name %q is longer than 15 bytes", c.TunName)
	case c.MTU < minMTU(c.Addr) || c.MTU > 65535:
		return fmt.Errorf("launcher: config: MTU %d out of range [%d, 65535]", c.MTU, minMTU(c.Addr))
	case c.KillGrace < 0:
		return fmt.Errorf("launcher: config: negative kill grace %v", c.KillGrace)
	}
	for _, r := range c.Routes {
		if !r.IsValid() {
			return fmt.Errorf("launcher: config: invalid route %v", r)
		}
	}
	return nil
}

func minMTU(a netip.Addr) int {
	if a.Is6() {
		return 1280
	}
	return 576
}

// message is the wire form of c for the job argv.
func (c Config) message(argv []string) *messages.Config {
	return &messages.Config{
		TunName:      c.TunName,
		Addr:         c.Addr,
		MTU:          c.MTU,
		Routes:       c.Routes,
		ServiceAddr:  c.ServiceAddr,
		DefaultRoute: c.DefaultRoute,
		HostTun:      c.HostTun,
		HostRoutes:   c.HostRoutes,
		DNS:          c.DNS,
		Hostname:     c.Hostname,
		Argv:         argv,
	}
}
