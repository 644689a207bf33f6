package meshtest

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
)

// EchoTCP starts a TCP echo server on 127.0.0.1 and returns its port. It
// half-closes its side when the client does.
func EchoTCP(tb testing.TB) uint16 {
	return serveTCP(tb, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
	})
}

// HashSinkTCP starts a server that reads a length-prefixed stream (8-byte
// big-endian length, then the bytes) and answers with its SHA-256.
func HashSinkTCP(tb testing.TB) uint16 {
	return serveTCP(tb, func(c net.Conn) {
		var n uint64
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return
		}
		h := sha256.New()
		if _, err := io.CopyN(h, c, int64(n)); err != nil {
			return
		}
		_, _ = c.Write(h.Sum(nil))
	})
}

func serveTCP(tb testing.TB, handle func(net.Conn)) uint16 {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	conns := make(map[net.Conn]struct{})
	var mu sync.Mutex
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); c.Close() }()
				handle(c)
			})
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// EchoUDP starts a UDP echo server on 127.0.0.1 and returns its port.
func EchoUDP(tb testing.TB) uint16 {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 65535)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], addr)
		}
	})
	tb.Cleanup(func() { pc.Close(); wg.Wait() })
	return uint16(pc.LocalAddr().(*net.UDPAddr).Port)
}

// Pattern is a deterministic byte stream for transfer checks: byte i of
// flow seed is a function of both, so misordered or mixed-up data shows.
type Pattern struct {
	seed uint64
	off  uint64
}

// NewPattern returns the stream for seed.
func NewPattern(seed uint64) *Pattern { return &Pattern{seed: seed} }

// Read fills p with the next bytes of the stream; it never fails.
func (r *Pattern) Read(p []byte) (int, error) {
	for i := range p {
		x := (r.off + i2u(i)) * 0x9E3779B97F4A7C15
		x ^= r.seed * 0xBF58476D1CE4E5B9
		p[i] = byte(x >> 56)
	}
	r.off += uint64(len(p))
	return len(p), nil
}

func i2u(i int) uint64 { return uint64(i) }
