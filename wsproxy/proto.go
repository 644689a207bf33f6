package wsproxy

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Subprotocol names the wire format: one binary message per WireGuard
// datagram. A server refuses clients that do not offer it.
const Subprotocol = "meshlaunch.wg.v1"

// wgOverhead is what WireGuard adds to an inner packet in a transport
// message: a 16-byte header, up to 15 bytes of padding and a 16-byte tag.
const wgOverhead = 16 + 15 + 16

// maxDatagram is wireguard-go's largest datagram (device.MaxMessageSize).
const maxDatagram = 65535

// ReadLimit is the largest websocket message a peer with inner MTU mtu can
// legitimately send. Anything bigger is a protocol error (close 1009).
func ReadLimit(mtu int) int {
	return min(mtu+wgOverhead, maxDatagram)
}

// Sentinel errors callers branch on.
var (
	// ErrNotConnected is returned by Client.Send while no websocket is up.
	ErrNotConnected = errors.New("wsproxy: not connected")
	// ErrUnauthorized means the server refused the credential (HTTP 401).
	ErrUnauthorized = errors.New("wsproxy: server refused the credential (401): the secret differs from the sidecar's")
	// ErrSessionGone is returned by Server.Send for a closed session.
	ErrSessionGone = errors.New("wsproxy: session closed")
)

// ParseServerURL checks a server URL: ws:// or wss://, a host, an optional
// path prefix, and nothing that would leak or be ignored (credentials,
// query, fragment).
func ParseServerURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("wsproxy: server URL %q: %w", s, err)
	}
	switch {
	case u.Scheme != "ws" && u.Scheme != "wss":
		return nil, fmt.Errorf("wsproxy: server URL %q: scheme must be ws:// or wss://", s)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("wsproxy: server URL %q: no host", s)
	case u.User != nil:
		return nil, fmt.Errorf("wsproxy: server URL %q: credentials in the URL are not allowed (use the token file)", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("wsproxy: server URL %q: query and fragment are not allowed", s)
	}
	if i := strings.IndexFunc(u.Host, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
		return nil, fmt.Errorf("wsproxy: server URL %q: the host has a character that is not printable ASCII (write international names in punycode)", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// JoinPath returns base with p appended to its path prefix.
func JoinPath(base *url.URL, p string) *url.URL {
	u := *base
	u.Path = strings.TrimRight(base.Path, "/") + "/" + strings.TrimLeft(p, "/")
	u.RawPath = ""
	return &u
}

// httpURL is u with ws/wss mapped to http/https, for proxy selection.
func httpURL(u *url.URL) *url.URL {
	h := *u
	h.Scheme = strings.Replace(u.Scheme, "ws", "http", 1)
	return &h
}
