package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// Job is a namespace child that has set up its namespace and waits for Go.
// Its methods are safe for concurrent use.
type Job struct {
	tun      *os.File
	tunName  string
	hostTun  *os.File
	proc     *os.Process
	conn     *messages.Conn
	grace    time.Duration
	log      *slog.Logger
	exited   <-chan exitResult
	done     chan struct{} // closed when the child has exited and the result is set
	wg       sync.WaitGroup
	stopCtx  func() bool
	mu       sync.Mutex
	killer   *time.Timer // armed by the first terminating signal
	code     int
	waitErr  error
	sentGo   bool
	finished bool
}

// Start creates the namespaces, runs the child and waits until the
// namespace is set up (TUN interface configured, resolv.conf mounted). The
// job, argv, starts only when Go is called. ctx bounds the setup and the
// job's life: when it ends, the job gets SIGTERM and, after KillGrace, the
// namespace SIGKILL.
//
// On error nothing is left running. Errors wrap ErrUserNamespaces,
// ErrTunPermission, ErrTunMissing or ErrMount where they apply.
func Start(ctx context.Context, cfg Config, argv []string) (*Job, error) {
	if len(argv) == 0 {
		return nil, errors.New("launcher: start: empty command")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	conn, childEnd, err := messages.Socketpair()
	if err != nil {
		return nil, fmt.Errorf("launcher: start: %w", err)
	}
	cmd := childCommand(cfg, childEnd)
	exited, err := startLocked(cmd)
	childEnd.Close()
	if err != nil {
		conn.Close()
		return nil, startError(err)
	}
	j := &Job{proc: cmd.Process, conn: conn, grace: cfg.KillGrace, log: cfg.Logger,
		exited: exited, done: make(chan struct{})}
	j.wg.Go(j.reap)
	if err := j.handshake(ctx, cfg.message(argv)); err != nil {
		j.proc.Kill()
		j.Wait()
		return nil, err
	}
	j.stopCtx = context.AfterFunc(ctx, func() { j.Signal(unix.SIGTERM) })
	if cfg.ForwardSignals {
		j.forwardSignals()
	}
	return j, nil
}

func childCommand(cfg Config, childEnd *os.File) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:        selfExe,
		Args:        []string{os.Args[0], messages.ChildArg},
		Env:         cfg.Env,
		Dir:         cfg.Dir,
		Stdin:       orStd(cfg.Stdin, os.Stdin),
		Stdout:      orStd(cfg.Stdout, os.Stdout),
		Stderr:      orStd(cfg.Stderr, os.Stderr),
		ExtraFiles:  []*os.File{childEnd}, // messages.ChildFD
		SysProcAttr: namespaceAttr(cfg.Hostname != ""),
	}
	return cmd
}

func orStd(f, std *os.File) *os.File {
	if f != nil {
		return f
	}
	return std
}

// handshake sends the config and waits for Ready (with the TUN file).
func (j *Job) handshake(ctx context.Context, cfg *messages.Config) error {
	if err := j.conn.Send(ctx, messages.Message{Type: messages.TypeConfig, Config: cfg}, nil); err != nil {
		return fmt.Errorf("launcher: send config: %w", err)
	}
	m, f, err := j.conn.Recv(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("launcher: wait for namespace setup (see the child's stderr): %w", err)
	case m.Type == messages.TypeError && m.Error != nil:
		closeIf(f)
		return &childError{kind: m.Error.Kind, msg: m.Error.Message}
	case m.Type != messages.TypeReady || m.Ready == nil || f == nil:
		closeIf(f)
		return fmt.Errorf("launcher: namespace setup: unexpected %q message", m.Type)
	}
	j.tun, j.tunName = f, m.Ready.TunName
	if cfg.HostTun == "" {
		return nil
	}
	m, f, err = j.conn.Recv(ctx)
	if err != nil {
		return fmt.Errorf("launcher: wait for the host-NAT interface: %w", err)
	}
	if m.Type != messages.TypeHostTUN || f == nil {
		closeIf(f)
		return fmt.Errorf("launcher: wait for the host-NAT interface: unexpected %q message", m.Type)
	}
	j.hostTun = f
	return nil
}

// HostTUN returns the host-NAT interface's file, if Config.HostTun was
// set; the caller owns it like TUN.
func (j *Job) HostTUN() *os.File { return j.hostTun }

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// TUN returns the TUN interface's file. The caller owns it from Start on
// (for instance wireguard-go takes it over) and closes it; the interface
// disappears when the last descriptor to it is closed.
func (j *Job) TUN() *os.File { return j.tun }

// TunName is the TUN interface's name inside the namespace.
func (j *Job) TunName() string { return j.tunName }

// Pid is the child's process id (in the caller's PID namespace).
func (j *Job) Pid() int { return j.proc.Pid }

// Go lets the job start. Call it once, when the tunnel is up.
func (j *Job) Go(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.sentGo {
		return errors.New("launcher: go: already sent")
	}
	j.sentGo = true
	if err := j.conn.Send(ctx, messages.Message{Type: messages.TypeGo}, nil); err != nil {
		return fmt.Errorf("launcher: go: %w", err)
	}
	j.log.Debug("launcher: job started", "pid", j.proc.Pid)
	return nil
}
