// Package child is the half of the launcher that runs inside the new user,
// network, mount and PID namespaces, as PID 1 of the PID namespace.
//
// The parent (package launcher) re-executes its own binary with
// os.Args[1] == messages.ChildArg and its end of a socketpair as descriptor
// messages.ChildFD. The program's main must call MaybeRun before anything
// else (flag parsing, logging setup, other goroutines):
//
//	func main() {
//		child.MaybeRun() // never returns in the launcher's child
//		...
//	}
//
// The child receives a messages.Config, brings up lo, creates and
// configures the TUN interface, bind-mounts a generated resolv.conf, mounts
// a fresh /proc, passes the TUN descriptor to the parent with a Ready
// message, waits for Go, and then runs the job. It reaps every process
// re-parented to it, forwards signals to the job, and exits with the job's
// exit code (128+N if the job died of signal N); the kernel then kills every
// process left in the PID namespace.
package child

import (
	"context"
	"fmt"
	"os"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// MaybeRun runs the child or the doctor probe and exits the process if
// os.Args selects one; otherwise it returns at once.
func MaybeRun() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case messages.ChildArg:
		os.Exit(Run())
	case messages.ProbeArg:
		os.Exit(Probe())
	}
}

// exitSetup is the child's exit code when it fails before the job starts
// (the parent has already been told why).
const exitSetup = 125

// Run is the child's main; it returns the process exit code.
func Run() int {
	ctx := context.Background()
	conn, err := messages.FileConn(os.NewFile(messages.ChildFD, "meshlaunch-socket"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "meshlaunch child: %v\n", err)
		return exitSetup
	}
	defer conn.Close()
	// Signals are caught from the start so that a signal forwarded by the
	// parent before the job exists ends the child (PID 1 ignores signals
	// without a handler).
	sigs := notifySignals()
	cfg, err := receiveConfig(ctx, conn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "meshlaunch child: %v\n", err)
		return exitSetup
	}
	if err := handshake(ctx, conn, cfg); err != nil {
		return exitSetup
	}
	if code, stopped := awaitGo(ctx, conn, sigs); stopped {
		return code
	}
	conn.Close()
	return runJob(cfg, sigs)
}

func receiveConfig(ctx context.Context, conn *messages.Conn) (*messages.Config, error) {
	m, f, err := conn.Recv(ctx)
	if f != nil {
		f.Close()
	}
	if err != nil {
		return nil, err
	}
	if m.Type != messages.TypeConfig || m.Config == nil {
		return nil, fmt.Errorf("child: expected config, got %q", m.Type)
	}
	return m.Config, nil
}

// handshake sets the namespace up and answers Ready with the TUN descriptor,
// or Error.
func handshake(ctx context.Context, conn *messages.Conn, cfg *messages.Config) error {
	tun, hostTun, err := setup(cfg)
	if err != nil {
		report(ctx, conn, err)
		return err
	}
	defer tun.Close()
	ready := messages.Message{Type: messages.TypeReady, Ready: &messages.Ready{TunName: cfg.TunName}}
	if err := conn.Send(ctx, ready, tun); err != nil || hostTun == nil {
		return err
	}
	defer hostTun.Close()
	return conn.Send(ctx, messages.Message{Type: messages.TypeHostTUN, Ready: &messages.Ready{TunName: cfg.HostTun}}, hostTun)
}

// report sends err to the parent as an Error message.
func report(ctx context.Context, conn *messages.Conn, err error) {
	m := messages.Message{Type: messages.TypeError, Error: &messages.Error{Kind: kindOf(err), Message: err.Error()}}
	if sendErr := conn.Send(ctx, m, nil); sendErr != nil {
		fmt.Fprintf(os.Stderr, "meshlaunch child: %v\n", err)
	}
}

// setup builds the namespace; it returns the TUN file and, if asked for,
// the host-NAT TUN file.
func setup(cfg *messages.Config) (tun, hostTun *os.File, err error) {
	if err := makeMountsPrivate(); err != nil {
		return nil, nil, err
	}
	if err := setHostname(cfg.Hostname); err != nil {
		return nil, nil, err
	}
	if err := linkUp("lo"); err != nil {
		return nil, nil, err
	}
	if tun, err = createTUN(cfg.TunName); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			tun.Close()
			if hostTun != nil {
				hostTun.Close()
			}
		}
	}()
	if err = configureTUN(cfg); err != nil {
		return nil, nil, err
	}
	if cfg.HostTun != "" {
		if hostTun, err = createTUN(cfg.HostTun); err != nil {
			return nil, nil, err
		}
		if err = configureHostTUN(cfg); err != nil {
			return nil, nil, err
		}
	}
	if err = mountResolvConf(cfg.DNS); err != nil {
		return nil, nil, err
	}
	if err = mountProc(); err != nil {
		return nil, nil, err
	}
	return tun, hostTun, nil
}

// awaitGo waits for the parent's Go. stopped is true when the child must
// exit instead (the parent went away, or a signal arrived), with code.
func awaitGo(ctx context.Context, conn *messages.Conn, sigs <-chan os.Signal) (code int, stopped bool) {
	type result struct {
		m   messages.Message
		err error
	}
	got := make(chan result, 1)
	go func() { // ends when conn is closed at the latest (deferred in Run)
		m, f, err := conn.Recv(ctx)
		if f != nil {
			f.Close()
		}
		got <- result{m, err}
	}()
	for {
		select {
		case r := <-got:
			if r.err != nil || r.m.Type != messages.TypeGo {
				return exitSetup, true
			}
			return 0, false
		case s := <-sigs:
			if code, ok := terminatingCode(s); ok {
				return code, true
			}
		}
	}
}
