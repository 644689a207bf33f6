package tunnel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Forward is one -L or -R port forward.
type Forward struct {
	Proto string // "tcp" or "udp"
	// Bind is the local listen address of -L (default 127.0.0.1).
	Bind netip.AddrPort
	// RemotePort is the pod port of -R.
	RemotePort uint16
	// Host and Port are the destination: on the pod's side for -L (a
	// name is resolved by the sidecar), on this node for -R.
	Host string
	Port uint16
	// ProxyProtocol makes -R TCP write a PROXY protocol v1 header with the
	// pod client's address to the local service before any data.
	ProxyProtocol bool
}

func (f Forward) dst() string { return net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))) }

// String renders f in the form it was parsed from.
func (f Forward) String() string {
	s := f.dst() + "/" + f.Proto
	if f.RemotePort != 0 {
		return strconv.Itoa(int(f.RemotePort)) + ":" + s
	}
	return f.Bind.String() + ":" + s
}

const (
	localForm  = "[BIND:]PORT:HOST:PORT[/udp], e.g. 8080:web.default.svc:80 or 127.0.0.1:5353:kube-dns.kube-system:53/udp"
	remoteForm = "PORT:HOST:PORT[/udp], e.g. 8888:localhost:8888 (pod port 8888 to port 8888 on this node)"
	socksForm  = "[BIND:]PORT, e.g. 1080 or 127.0.0.1:1080"
)

var defaultBind = netip.MustParseAddr("127.0.0.1")

// ParseLocal parses a -L spec: [BIND:]PORT:HOST:PORT[/udp]. BIND is an IP
// address ([v6] in brackets) and defaults to 127.0.0.1; HOST is a name,
// an IPv4 address or a bracketed IPv6 address.
func ParseLocal(spec string) (Forward, error) {
	f, err := parseLocal(spec)
	if err != nil {
		return Forward{}, fmt.Errorf("tunnel: -L %q: %w; want %s", spec, err, localForm)
	}
	return f, nil
}

func parseLocal(spec string) (Forward, error) {
	body, proto, err := splitProto(spec)
	if err != nil {
		return Forward{}, err
	}
	fields, err := splitFields(body)
	if err != nil {
		return Forward{}, err
	}
	bind := defaultBind
	switch len(fields) {
	case 3:
	case 4:
		if bind, err = parseBind(fields[0]); err != nil {
			return Forward{}, err
		}
		fields = fields[1:]
	default:
		return Forward{}, fmt.Errorf("%d fields separated by ':' (IPv6 addresses go in brackets)", len(fields))
	}
	f, err := parseTarget(proto, fields[1], fields[2])
	if err != nil {
		return Forward{}, err
	}
	lport, err := parsePortNum("local port", fields[0])
	if err != nil {
		return Forward{}, err
	}
	f.Bind = netip.AddrPortFrom(bind, lport)
	return f, nil
}

// ParseRemote parses a -R spec: PORT:HOST:PORT[/udp]. The first PORT is
// the pod port (it must be in the sidecar's --expose list); HOST:PORT is
// reached from this node.
func ParseRemote(spec string) (Forward, error) {
	f, err := parseRemote(spec)
	if err != nil {
		return Forward{}, fmt.Errorf("tunnel: -R %q: %w; want %s", spec, err, remoteForm)
	}
	return f, nil
}

func parseRemote(spec string) (Forward, error) {
	body, proto, err := splitProto(spec)
	if err != nil {
		return Forward{}, err
	}
	fields, err := splitFields(body)
	if err != nil {
		return Forward{}, err
	}
	if len(fields) != 3 {
		return Forward{}, fmt.Errorf("%d fields separated by ':' (the pod side always listens on all its addresses; IPv6 addresses go in brackets)", len(fields))
	}
	f, err := parseTarget(proto, fields[1], fields[2])
	if err != nil {
		return Forward{}, err
	}
	if f.RemotePort, err = parsePortNum("pod port", fields[0]); err != nil {
		return Forward{}, err
	}
	return f, nil
}

// ParseSocks parses a --socks spec: [BIND:]PORT, BIND defaulting to
// 127.0.0.1 (the proxy has no authentication).
func ParseSocks(spec string) (netip.AddrPort, error) {
	fields, err := splitFields(spec)
	bind := defaultBind
	if err == nil && len(fields) == 2 {
		bind, err = parseBind(fields[0])
		fields = fields[1:]
	}
	if err == nil && len(fields) != 1 {
		err = errors.New("too many ':'")
	}
	var port uint16
	if err == nil {
		port, err = parsePortNum("port", fields[0])
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("tunnel: --socks %q: %w; want %s", spec, err, socksForm)
	}
	return netip.AddrPortFrom(bind, port), nil
}

// splitProto cuts an optional /tcp or /udp suffix.
func splitProto(spec string) (string, string, error) {
	body, proto, found := strings.Cut(strings.TrimSpace(spec), "/")
	if !found {
		return body, "tcp", nil
	}
	if proto != "tcp" && proto != "udp" {
		return "", "", fmt.Errorf("protocol %q is not tcp or udp", proto)
	}
	return body, proto, nil
}

// splitFields splits on ':' outside brackets and strips the brackets.
func splitFields(s string) ([]string, error) {
	var fields []string
	for s != "" {
		var f string
		if s[0] == '[' {
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, errors.New("unclosed '['")
			}
			f, s = s[1:end], s[end+1:]
			if s != "" && s[0] != ':' {
				return nil, errors.New("']' must be followed by ':'")
			}
		} else {
			i := strings.IndexByte(s, ':')
			if i < 0 {
				i = len(s)
			}
			f, s = s[:i], s[i:]
		}
		fields = append(fields, f)
		if s != "" {
			s = s[1:]
			if s == "" {
				fields = append(fields, "")
			}
		}
	}
	return fields, nil
}

func parseBind(s string) (netip.Addr, error) {
	if s == "localhost" {
		return defaultBind, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bind address %q is not an IP address", s)
	}
	return a.Unmap(), nil
}

func parseTarget(proto, host, port string) (Forward, error) {
	if err := checkHost(host); err != nil {
		return Forward{}, err
	}
	p, err := parsePortNum("destination port", port)
	if err != nil {
		return Forward{}, err
	}
	return Forward{Proto: proto, Host: host, Port: p}, nil
}

func checkHost(h string) error {
	if h == "" {
		return errors.New("empty host")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	// ':' only in an IPv6 address: "[a:b]" is neither form.
	if len(h) > 253 || strings.ContainsAny(h, " \t/?#@%[]:") {
		return fmt.Errorf("host %q is neither an IP address nor a host name", h)
	}
	return nil
}

func parsePortNum(what, s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%s %q is not a number in 1-65535", what, s)
	}
	return uint16(n), nil
}
