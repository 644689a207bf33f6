package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlaunch/meshlaunch/hostnat"
	"github.com/meshlaunch/meshlaunch/internal/relay"
)

// Publish forwards a host port into the job, like `docker run -p`.
type Publish struct {
	Bind  netip.AddrPort // host address and port; 127.0.0.1 unless given
	Port  uint16         // the job's port
	Proto string         // "tcp" or "udp"
}

func (p Publish) String() string { return fmt.Sprintf("%s:%d/%s", p.Bind, p.Port, p.Proto) }

// ParsePublish parses [BIND:]HOSTPORT:PORT[/udp]. The default bind is
// 127.0.0.1: publishing on every interface of a shared node must be asked
// for (0.0.0.0:8080:80).
func ParsePublish(s string) (Publish, error) {
	spec, proto, hasProto := strings.Cut(s, "/")
	if !hasProto {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" {
		return Publish{}, fmt.Errorf("publish %q: protocol %q is not tcp or udp", s, proto)
	}
	i := strings.LastIndex(spec, ":")
	if i < 0 {
		return Publish{}, fmt.Errorf("publish %q: want [BIND:]HOSTPORT:PORT[/udp], e.g. 8080:80 or 0.0.0.0:8080:80", s)
	}
	port, err := parsePort(spec[i+1:])
	if err != nil {
		return Publish{}, fmt.Errorf("publish %q: job port: %w", s, err)
	}
	host := spec[:i]
	bind := "127.0.0.1"
	if j := strings.LastIndex(host, ":"); j >= 0 {
		bind, host = strings.Trim(host[:j], "[]"), host[j+1:]
	}
	hp, err := parsePort(host)
	if err != nil {
		return Publish{}, fmt.Errorf("publish %q: host port: %w", s, err)
	}
	addr, err := netip.ParseAddr(bind)
	if err != nil {
		return Publish{}, fmt.Errorf("publish %q: bind address %q is not an IP address", s, bind)
	}
	return Publish{Bind: netip.AddrPortFrom(addr, hp), Port: port, Proto: proto}, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a port (1-65535)", s)
	}
	return uint16(n), nil
}

// publisher owns the listeners of published ports and their flows.
type publisher struct {
	ctx    context.Context // alive until close
	cancel context.CancelFunc
	nat    *hostnat.NAT
	job    netip.Addr
	log    *slog.Logger
	wg     sync.WaitGroup

	mu      sync.Mutex
	closers []interface{ Close() error }
}

func publish(pubs []Publish, nat *hostnat.NAT, job netip.Addr, log *slog.Logger) (*publisher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &publisher{ctx: ctx, cancel: cancel, nat: nat, job: job, log: log}
	for _, pub := range pubs {
		if err := p.listen(pub); err != nil {
			p.close()
			return nil, fmt.Errorf("launcher: publish %s: %w", pub, err)
		}
	}
	return p, nil
}

func (p *publisher) listen(pub Publish) error {
	dst := netip.AddrPortFrom(p.job, pub.Port)
	if pub.Proto == "udp" {
		pc, err := net.ListenPacket("udp", pub.Bind.String())
		if err != nil {
			return err
		}
		p.track(pc)
		p.wg.Go(func() {
			relay.ServeUDP(pc, relay.UDPConfig{
				Dial: func(netip.AddrPort) (net.Conn, error) { return p.nat.DialJob(p.ctx, "udp", dst) },
				Idle: 60 * time.Second, Logger: p.log,
			})
		})
		return nil
	}
	ln, err := net.Listen("tcp", pub.Bind.String())
	if err != nil {
		return err
	}
	p.track(ln)
	p.wg.Go(func() { p.acceptTCP(ln, dst) })
	return nil
}

func (p *publisher) track(c interface{ Close() error }) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closers = append(p.closers, c)
}

func (p *publisher) acceptTCP(ln net.Listener, dst netip.AddrPort) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.log.Warn("publish: accept failed", "listen", ln.Addr(), "err", err)
			}
			return
		}
		p.wg.Go(func() { p.forward(c, dst) })
	}
}

func (p *publisher) forward(c net.Conn, dst netip.AddrPort) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	up, err := p.nat.DialJob(ctx, "tcp", dst)
	cancel()
	if err != nil {
		p.log.Debug("publish: the job refused", "dst", dst, "err", err)
		c.Close()
		return
	}
	relay.Splice(p.ctx, c, up)
}

// close stops the listeners and every published flow, and waits.
func (p *publisher) close() {
	p.cancel()
	p.mu.Lock()
	for _, c := range p.closers {
		c.Close()
	}
	p.closers = nil
	p.mu.Unlock()
	p.wg.Wait()
}
