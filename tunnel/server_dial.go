package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/meshlaunch/meshlaunch/policy"
)

// dst is a parsed ?dst=HOST:PORT.
type dst struct {
	host string
	port uint16
}

func (d dst) String() string { return net.JoinHostPort(d.host, strconv.Itoa(int(d.port))) }

func parseDst(s string) (dst, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return dst{}, fmt.Errorf("dst %q: want HOST:PORT", s)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return dst{}, fmt.Errorf("dst %q: port must be 1-65535", s)
	}
	return dst{host: host, port: uint16(port)}, nil
}

// dialDst resolves d with the server's resolver and dials each address in
// turn through cfg.Dial, which applies the policy to the resolved address.
// If every address is refused by the policy the denial is returned;
// otherwise the last other failure.
func (s *Server) dialDst(ctx context.Context, network string, d dst) (net.Conn, error) {
	addrs, err := s.resolve(ctx, d.host)
	if err != nil {
		return nil, err
	}
	var denial, last error
	for _, a := range addrs {
		c, err := s.cfg.Dial(ctx, network, netip.AddrPortFrom(a, d.port).String())
		if err == nil {
			return c, nil
		}
		if errors.As(err, new(*policy.Denial)) {
			denial = cmpOr(denial, err)
		} else {
			last = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, cmpOr(last, denial)
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (s *Server) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := s.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, &resolveError{host: host, err: err}
	}
	if len(addrs) == 0 {
		return nil, &resolveError{host: host, err: errors.New("no addresses")}
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	return addrs, nil
}

type resolveError struct {
	host string
	err  error
}

func (e *resolveError) Error() string { return "resolve " + e.host + ": " + e.err.Error() }
func (e *resolveError) Unwrap() error { return e.err }

// refuse answers a failed dial before the upgrade: 403 for the policy,
// 504 for a timeout, 502 otherwise, with a one-line reason for the client.
func (s *Server) refuse(w http.ResponseWriter, network string, d dst, err error) {
	status, msg := refusal(network, d, err)
	if status == http.StatusForbidden {
		s.counters.denied.Add(1)
	} else {
		s.counters.dialFails.Add(1)
	}
	s.log.Info("tunnel: destination refused", "network", network, "dst", d.String(), "status", status, "reason", msg)
	http.Error(w, msg, status)
}

func refusal(network string, d dst, err error) (int, string) {
	var den *policy.Denial
	var rerr *resolveError
	var nerr net.Error
	switch {
	case errors.As(err, &den):
		return http.StatusForbidden, fmt.Sprintf("%s to %s (%s) denied by the sidecar's egress policy: %s", network, d, den.Dst, den.Reason)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()):
		return http.StatusGatewayTimeout, fmt.Sprintf("%s to %s: timed out", network, d)
	case errors.As(err, &rerr):
		return http.StatusBadGateway, fmt.Sprintf("%s to %s: %v", network, d, rerr)
	}
	var oerr *net.OpError
	if errors.As(err, &oerr) && oerr.Err != nil {
		err = oerr.Err
	}
	return http.StatusBadGateway, fmt.Sprintf("%s to %s: %v", network, d, err)
}
