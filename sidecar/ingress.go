package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/relay"
	"github.com/meshlaunch/meshlaunch/netstack"
)

// udpIngressIdle reaps an ingress UDP session after this long without
// traffic either way.
const udpIngressIdle = 60 * time.Second

// ingress listens on exposed pod ports and forwards every connection (or
// UDP session) into the tunnel to the job, with the client's own address
// as the source the job sees. It owns its listeners and flows.
type ingress struct {
	stack *netstack.Stack
	job   netip.Addr
	self  netip.Addr // stands in for clients on the pod's loopback
	// reachable reports whether a job is connected at all; without one a
	// client is reset at once instead of waiting out the dial timeout.
	reachable func() bool
	max       int
	log       *slog.Logger

	ctx      context.Context // alive until stop
	cancel   context.CancelFunc
	accepts  sync.WaitGroup // listener loops (a UDP loop owns its sessions)
	tcpFlows sync.WaitGroup // TCP flows

	mu    sync.Mutex
	ports map[Port]*portListener // nil after close

	flows    atomic.Int64
	accepted atomic.Uint64
	refused  atomic.Uint64
}

func newIngress(st *netstack.Stack, job, self netip.Addr, max int, log *slog.Logger) *ingress {
	ctx, cancel := context.WithCancel(context.Background()) // alive until stop
	return &ingress{stack: st, job: job, self: self, max: max, log: log, ctx: ctx, cancel: cancel,
		ports: map[Port]*portListener{}}
}

// source is the address the job sees for client c. A client on the pod's
// loopback (another container, kubectl port-forward) cannot be shown as
// such: the job's own loopback would answer. It appears as the in-tunnel
// service address, which routes back through the tunnel.
func (in *ingress) source(c netip.AddrPort) netip.AddrPort {
	a := c.Addr().Unmap()
	if a.IsLoopback() || a.IsUnspecified() {
		return netip.AddrPortFrom(in.self, c.Port())
	}
	return netip.AddrPortFrom(a, c.Port())
}

// portListener is one exposed port's listener and its serving loop.
type portListener struct {
	c    io.Closer
	done chan struct{} // closed when the loop has returned
}

// errIngressClosed refuses a listen after close.
var errIngressClosed = errors.New("ingress closed")

// listen opens the pod port p and starts forwarding it.
func (in *ingress) listen(p Port) error {
	addr := fmt.Sprintf(":%d", p.Num)
	var serve func()
	var c io.Closer
	if p.Proto == "udp" {
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return fmt.Errorf("listen udp %s: %w", addr, err)
		}
		c, serve = pc, func() { in.serveUDP(pc, p.Num) }
	} else {
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			return fmt.Errorf("listen tcp %s: %w", addr, err)
		}
		c, serve = ln, func() { in.serveTCP(ln, p.Num) }
	}
	pl := &portListener{c: c, done: make(chan struct{})}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.ports == nil {
		c.Close()
		return errIngressClosed
	}
	in.ports[p] = pl
	in.accepts.Go(func() {
		defer close(pl.done)
		serve()
	})
	return nil
}

// claim frees port p for someone else (a tunnel -R registration) and
// returns the function that takes it back. Established TCP flows of the
// port go on; its UDP sessions end.
func (in *ingress) claim(p Port) (func(), error) {
	in.mu.Lock()
	pl := in.ports[p]
	delete(in.ports, p)
	in.mu.Unlock()
	if pl != nil {
		pl.c.Close()
		<-pl.done
	}
	return func() {
		if err := in.listen(p); err != nil && !errors.Is(err, errIngressClosed) {
			in.log.Warn("ingress: cannot take the port back after a tunnel used it", "port", p, "err", err)
		}
	}, nil
}

// close stops accepting; established TCP flows go on until their peers
// close them or stop ends them. UDP sessions end with their listener.
func (in *ingress) close() {
	in.mu.Lock()
	ports := in.ports
	in.ports = nil
	in.mu.Unlock()
	for _, pl := range ports {
		pl.c.Close()
	}
	in.accepts.Wait()
}

// stop ends every flow and waits for it.
func (in *ingress) stop() {
	in.cancel()
	in.close()
	in.tcpFlows.Wait()
}

func (in *ingress) active() int { return int(in.flows.Load()) }

// admit reserves a flow slot.
func (in *ingress) admit() bool {
	if in.flows.Add(1) > int64(in.max) {
		in.flows.Add(-1)
		in.refused.Add(1)
		return false
	}
	in.accepted.Add(1)
	return true
}

func (in *ingress) release() { in.flows.Add(-1) }

func (in *ingress) serveTCP(ln net.Listener, port uint16) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				in.log.Warn("ingress accept failed", "port", port, "err", err)
			}
			return
		}
		if !in.admit() {
			abort(c)
			continue
		}
		in.tcpFlows.Go(func() {
			defer in.release()
			in.forwardTCP(c, port)
		})
	}
}

// forwardTCP dials the job from the client's address and splices.
func (in *ingress) forwardTCP(c net.Conn, port uint16) {
	client, ok := addrPortOf(c.RemoteAddr())
	if !ok {
		abort(c)
		return
	}
	src := in.source(client)
	if in.reachable != nil && !in.reachable() {
		in.log.Debug("ingress: no job connected", "client", client, "port", port)
		abort(c)
		return
	}
	ctx, cancel := context.WithTimeout(in.ctx, 10*time.Second)
	up, err := in.stack.DialTCP(ctx, src, netip.AddrPortFrom(in.job, port))
	cancel()
	if err != nil {
		in.log.Debug("ingress dial to the job failed", "client", src, "port", port, "err", err)
		abort(c) // RST: the client learns at once that the job is not there
		return
	}
	relay.Splice(in.ctx, c, up)
}

// abort closes c with a RST.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

func addrPortOf(a net.Addr) (netip.AddrPort, bool) {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort(), true
	case *net.UDPAddr:
		return a.AddrPort(), true
	}
	return netip.AddrPort{}, false
}

// serveUDP forwards datagrams arriving on pc, one session per client.
func (in *ingress) serveUDP(pc net.PacketConn, port uint16) {
	relay.ServeUDP(pc, relay.UDPConfig{
		Dial: func(client netip.AddrPort) (net.Conn, error) {
			return in.stack.DialUDP(in.source(client), netip.AddrPortFrom(in.job, port))
		},
		Idle:    udpIngressIdle,
		Admit:   in.admit,
		Release: in.release,
		Logger:  in.log,
	})
}
