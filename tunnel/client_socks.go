package tunnel

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// socksHandshakeTimeout bounds a SOCKS client's greeting and request.
const socksHandshakeTimeout = 10 * time.Second

// socksServer is a --socks listener.
type socksServer struct {
	c  *Client
	ln net.Listener
}

func (s *socksServer) close() { _ = s.ln.Close() }

func (s *socksServer) serve(ctx context.Context, wg *sync.WaitGroup) {
	acceptLoop(s.ln, wg, func(conn net.Conn) { s.c.serveSocks(ctx, conn.(*net.TCPConn)) })
}

// serveSocks runs one SOCKS5 connection: CONNECT through a stream,
// UDP ASSOCIATE through UDP sessions.
func (c *Client) serveSocks(ctx context.Context, conn *net.TCPConn) {
	_ = conn.SetDeadline(time.Now().Add(socksHandshakeTimeout))
	cmd, dst, err := c.socksHandshake(conn)
	if err != nil {
		c.log.Debug("tunnel: socks handshake failed", "client", conn.RemoteAddr().String(), "err", err)
		_ = conn.Close()
		return
	}
	switch cmd {
	case socksConnect:
		c.socksConnect(ctx, conn, dst)
	case socksUDPAssociate:
		c.socksAssociate(ctx, conn)
	default:
		_ = socksReply(conn, repCmdUnsupported, netip.AddrPort{})
		_ = conn.Close()
	}
}

func (c *Client) socksHandshake(conn net.Conn) (byte, string, error) {
	if err := socksGreeting(conn); err != nil {
		return 0, "", err
	}
	cmd, dst, err := socksRequest(conn)
	if errors.Is(err, errSocksAtyp) {
		_ = socksReply(conn, repAtypUnsupported, netip.AddrPort{})
	}
	return cmd, dst, err
}

func (c *Client) socksConnect(ctx context.Context, conn *net.TCPConn, dst string) {
	ws, err := c.dial(ctx, PathTCP, url.Values{"dst": {dst}})
	if err != nil {
		c.logRefused("tcp", dst, err)
		_ = socksReply(conn, socksRep(err), netip.AddrPort{})
		_ = conn.Close()
		return
	}
	if err := socksReply(conn, repSucceeded, netip.AddrPort{}); err != nil {
		_ = ws.CloseNow()
		_ = conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	splice(ctx, ws, conn, c.ka)
}

// socksRep maps the sidecar's refusal to a SOCKS5 reply code.
func socksRep(err error) byte {
	var r *RefusedError
	if !errors.As(err, &r) {
		return repFailure
	}
	switch {
	case r.Status == http.StatusForbidden:
		return repNotAllowed
	case r.Status == http.StatusBadGateway && strings.Contains(r.Reason, "refused"):
		return repRefused
	case r.Status == http.StatusBadGateway || r.Status == http.StatusGatewayTimeout:
		return repHostUnreachable
	}
	return repFailure
}

// socksAssociate relays UDP for the client until its TCP connection ends.
// Datagrams are accepted only from the client's IP address.
func (c *Client) socksAssociate(ctx context.Context, conn *net.TCPConn) {
	defer conn.Close()
	local := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local.Addr(), 0)))
	if err != nil {
		_ = socksReply(conn, repFailure, netip.AddrPort{})
		return
	}
	defer pc.Close()
	if err := socksReply(conn, repSucceeded, pc.LocalAddr().(*net.UDPAddr).AddrPort()); err != nil {
		return
	}
	_ = conn.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(ctx)
	// Closing both unblocks the relay and the read below when ctx ends.
	context.AfterFunc(ctx, func() { _ = pc.Close(); _ = conn.Close() })
	var wg sync.WaitGroup
	client := conn.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	wg.Go(func() { c.relaySocksUDP(ctx, &wg, pc, client) })
	_, _ = conn.Read(make([]byte, 1)) // the association lives while the TCP connection does
	cancel()
	wg.Wait()
}

func (c *Client) relaySocksUDP(ctx context.Context, wg *sync.WaitGroup, pc *net.UDPConn, client netip.Addr) {
	mux := newUDPMux(c)
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if from.Addr().Unmap() != client {
			continue
		}
		dst, data, err := splitSocksUDP(buf[:n])
		if err != nil {
			continue
		}
		hdr := appendSocksAddr([]byte{0, 0, 0}, dst)
		deliver := func(p []byte) { _, _ = pc.WriteToUDPAddrPort(append(hdr[:len(hdr):len(hdr)], p...), from) }
		mux.send(ctx, wg, dst, dst, deliver, data)
	}
}
