package tunnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
)

// SOCKS5 (RFC 1928) constants: no authentication, CONNECT and UDP
// ASSOCIATE only.
const (
	socksVersion      = 5
	socksNoAuth       = 0
	socksNoAcceptable = 0xff

	socksConnect      = 1
	socksUDPAssociate = 3

	atypIPv4   = 1
	atypDomain = 3
	atypIPv6   = 4

	repSucceeded       = 0
	repFailure         = 1
	repNotAllowed      = 2
	repHostUnreachable = 4
	repRefused         = 5
	repCmdUnsupported  = 7
	repAtypUnsupported = 8
)

var errSocksAtyp = errors.New("tunnel: socks: address type not supported")

// socksGreeting reads the method offer and accepts "no authentication".
func socksGreeting(rw io.ReadWriter) error {
	var hdr [2]byte
	if _, err := io.ReadFull(rw, hdr[:]); err != nil {
		return fmt.Errorf("tunnel: socks greeting: %w", err)
	}
	if hdr[0] != socksVersion {
		return fmt.Errorf("tunnel: socks greeting: version %d is not SOCKS5", hdr[0])
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(rw, methods); err != nil {
		return fmt.Errorf("tunnel: socks greeting: %w", err)
	}
	for _, m := range methods {
		if m == socksNoAuth {
			_, err := rw.Write([]byte{socksVersion, socksNoAuth})
			return err
		}
	}
	_, _ = rw.Write([]byte{socksVersion, socksNoAcceptable})
	return errors.New("tunnel: socks greeting: the client insists on authentication")
}

// socksRequest reads a request: command and destination host:port.
func socksRequest(r io.Reader) (cmd byte, dst string, err error) {
	var hdr [3]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, "", fmt.Errorf("tunnel: socks request: %w", err)
	}
	if hdr[0] != socksVersion {
		return 0, "", fmt.Errorf("tunnel: socks request: version %d", hdr[0])
	}
	dst, err = readSocksAddr(r)
	return hdr[1], dst, err
}

// readSocksAddr reads ATYP, address and port. Domain names stay names:
// the sidecar resolves them.
func readSocksAddr(r io.Reader) (string, error) {
	var atyp [1]byte
	if _, err := io.ReadFull(r, atyp[:]); err != nil {
		return "", err
	}
	var host string
	switch atyp[0] {
	case atypIPv4, atypIPv6:
		b := make([]byte, 4)
		if atyp[0] == atypIPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case atypDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return "", err
		}
		b := make([]byte, n[0])
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		host = string(b)
	default:
		return "", errSocksAtyp
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))), nil
}

// appendSocksAddr appends ATYP, address and port of hostport.
func appendSocksAddr(b []byte, hostport string) []byte {
	host, ps, _ := net.SplitHostPort(hostport)
	port, _ := strconv.ParseUint(ps, 10, 16)
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if a.Is4() {
			b = append(b, atypIPv4)
		} else {
			b = append(b, atypIPv6)
		}
		b = append(b, a.AsSlice()...)
	} else {
		b = append(b, atypDomain, byte(len(host)))
		b = append(b, host...)
	}
	return binary.BigEndian.AppendUint16(b, uint16(port))
}

// socksReply writes a reply with code rep and bound address bnd.
func socksReply(w io.Writer, rep byte, bnd netip.AddrPort) error {
	if !bnd.IsValid() {
		bnd = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	b := appendSocksAddr([]byte{socksVersion, rep, 0}, bnd.String())
	_, err := w.Write(b)
	return err
}

// splitSocksUDP parses a UDP request datagram: RSV(2) FRAG ATYP DST DATA.
// Fragments are not supported (dropped), as most servers do.
func splitSocksUDP(p []byte) (dst string, data []byte, err error) {
	if len(p) < 4 || p[2] != 0 {
		return "", nil, errors.New("tunnel: socks udp: short or fragmented datagram")
	}
	r := &sliceReader{b: p[3:]}
	dst, err = readSocksAddr(r)
	if err != nil {
		return "", nil, err
	}
	return dst, r.b, nil
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
