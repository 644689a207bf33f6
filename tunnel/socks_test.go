package tunnel

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// socksDial performs a SOCKS5 handshake for cmd to host:port (host sent
// as a domain name unless it is an IP) and returns the reply code and the
// bound address.
func socksDial(t *testing.T, proxy netip.AddrPort, cmd byte, host string, port uint16) (net.Conn, byte, netip.AddrPort) {
	t.Helper()
	conn := dialRetry(t, "tcp", proxy.String())
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := []byte{5, 1, 0, 5, cmd, 0}
	req = appendSocksAddr(req, net.JoinHostPort(host, strconv.Itoa(int(port))))
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	var method [2]byte
	if _, err := io.ReadFull(conn, method[:]); err != nil || method != [2]byte{5, 0} {
		t.Fatalf("method selection %v, %v", method, err)
	}
	var hdr [3]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		t.Fatal(err)
	}
	bnd, err := readSocksAddr(conn)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, hdr[1], netip.MustParseAddrPort(bnd)
}

func TestSocksConnect(t *testing.T) {
	ts := newTestServer(t, nil)
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoTCP(t)
	proxy := loopback(freePort(t, "tcp"))
	runClient(t, c, nil, nil, []netip.AddrPort{proxy})

	t.Run("domain name resolved by the sidecar", func(t *testing.T) {
		conn, rep, _ := socksDial(t, proxy, socksConnect, "localhost", echo)
		defer conn.Close()
		if rep != repSucceeded {
			t.Fatalf("reply %d, want success", rep)
		}
		if got, err := roundTrip(conn, []byte("socks hello")); err != nil || string(got) != "socks hello" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("denied by the policy", func(t *testing.T) {
		conn, rep, _ := socksDial(t, proxy, socksConnect, "denied.test", echo)
		defer conn.Close()
		if rep != repNotAllowed {
			t.Fatalf("reply %d, want %d (not allowed by ruleset)", rep, repNotAllowed)
		}
	})
	t.Run("refused", func(t *testing.T) {
		conn, rep, _ := socksDial(t, proxy, socksConnect, "127.0.0.1", freePort(t, "tcp"))
		defer conn.Close()
		if rep != repRefused {
			t.Fatalf("reply %d, want %d (connection refused)", rep, repRefused)
		}
	})
}

func TestSocksUDPAssociate(t *testing.T) {
	ts := newTestServer(t, nil)
	c, _ := newTestClient(t, ts.url, testCred)
	echo := echoUDP(t)
	proxy := loopback(freePort(t, "tcp"))
	runClient(t, c, nil, nil, []netip.AddrPort{proxy})

	ctl, rep, relay := socksDial(t, proxy, socksUDPAssociate, "0.0.0.0", 0)
	defer ctl.Close()
	if rep != repSucceeded || !relay.IsValid() || relay.Port() == 0 {
		t.Fatalf("reply %d, relay %v", rep, relay)
	}
	conn, err := net.Dial("udp", relay.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst := net.JoinHostPort("localhost", strconv.Itoa(int(echo)))
	msg := append(appendSocksAddr([]byte{0, 0, 0}, dst), "udp via socks"...)
	got := udpRoundTrip(t, conn, msg)
	if !bytes.Equal(got, msg) {
		t.Fatalf("got %q, want %q (the reply carries the destination's header)", got, msg)
	}
	if binary.BigEndian.Uint16(got[len(got)-len("udp via socks")-2:]) != echo {
		t.Fatal("reply header names another port")
	}
}
