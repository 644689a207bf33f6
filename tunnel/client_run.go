package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// service is one local listener of Run: a -L forward or a SOCKS proxy.
type service interface {
	// serve accepts until the listener is closed; connections it starts
	// join wg and end when ctx ends.
	serve(ctx context.Context, wg *sync.WaitGroup)
	close()
}

// Run listens on every local forward and SOCKS address, registers every
// reverse forward and serves until ctx ends; it then closes every listener,
// websocket and connection and returns nil after they are gone. It fails
// at once when a listener cannot be opened or the sidecar refuses the
// credential, and later when the sidecar refuses a -R registration
// (a port it does not expose) or another client takes a -R port.
func (c *Client) Run(ctx context.Context, locals, remotes []Forward, socks []netip.AddrPort) error {
	if err := c.preflight(ctx); err != nil {
		return err
	}
	svcs, err := c.listenAll(locals, socks)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		fatalMu  sync.Mutex
		fatalErr error
	)
	for _, s := range svcs {
		wg.Go(func() { s.serve(ctx, &wg) })
	}
	for _, f := range remotes {
		wg.Go(func() {
			if err := c.runReverse(ctx, f, &wg); err != nil {
				fatalMu.Lock()
				fatalErr = cmpOr(fatalErr, err)
				fatalMu.Unlock()
				cancel()
			}
		})
	}
	<-ctx.Done()
	for _, s := range svcs {
		s.close()
	}
	wg.Wait()
	return fatalErr
}

// preflight fails on a refused credential or a sidecar without the tunnel
// endpoint; an unreachable sidecar is only logged (forwards dial it per
// connection, reverse forwards retry).
func (c *Client) preflight(ctx context.Context) error {
	err := c.Check(ctx)
	var refused *RefusedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnauthorized):
		return err
	case errors.As(err, &refused) && refused.Status == http.StatusNotFound:
		return fmt.Errorf("tunnel: the sidecar has no tunnel endpoint at %s (check the URL's path prefix): %w", c.cfg.URL.Redacted(), err)
	}
	if ctx.Err() != nil {
		return nil
	}
	c.log.Warn("tunnel: sidecar not reachable yet; continuing", "err", err)
	return nil
}

func (c *Client) listenAll(locals []Forward, socks []netip.AddrPort) ([]service, error) {
	var svcs []service
	fail := func(err error) ([]service, error) {
		for _, s := range svcs {
			s.close()
		}
		return nil, err
	}
	for _, f := range locals {
		s, err := c.listenLocal(f)
		if err != nil {
			return fail(err)
		}
		svcs = append(svcs, s)
	}
	for _, a := range socks {
		ln, err := net.Listen("tcp", a.String())
		if err != nil {
			return fail(fmt.Errorf("tunnel: --socks %v: %w", a, err))
		}
		c.log.Info("tunnel: SOCKS5 proxy listening", "addr", ln.Addr().String())
		svcs = append(svcs, &socksServer{c: c, ln: ln})
	}
	return svcs, nil
}

func (c *Client) listenLocal(f Forward) (service, error) {
	if f.Proto == "udp" {
		pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(f.Bind))
		if err != nil {
			return nil, fmt.Errorf("tunnel: -L %v: %w", f, err)
		}
		c.log.Info("tunnel: forwarding", "local", pc.LocalAddr().String()+"/udp", "to", f.dst())
		return newUDPForward(c, f, pc), nil
	}
	ln, err := net.Listen("tcp", f.Bind.String())
	if err != nil {
		return nil, fmt.Errorf("tunnel: -L %v: %w", f, err)
	}
	c.log.Info("tunnel: forwarding", "local", ln.Addr().String(), "to", f.dst())
	return &tcpForward{c: c, dst: f.dst(), ln: ln}, nil
}

// acceptLoop accepts from ln until it is closed and hands each connection
// to handle on a goroutine in wg.
func acceptLoop(ln net.Listener, wg *sync.WaitGroup, handle func(net.Conn)) {
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // e.g. EMFILE: back off instead of spinning
			time.Sleep(50 * time.Millisecond)
			continue
		}
		wg.Go(func() { handle(conn) })
	}
}
