package netstack

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// BenchmarkTCPThroughput streams from a client stack through a back-to-back
// router stack, to a listener on the router ("listener") and through the
// forwarder to a loopback sink ("forwarder"; "forwarder-8flows": eight
// flows at once, which the buffer budget gives 2 MiB each way instead of
// auto-tuning). Reported only.
func BenchmarkTCPThroughput(b *testing.B) {
	const chunk = 64 << 10
	run := func(b *testing.B, c net.Conn) {
		buf := make([]byte, chunk)
		b.SetBytes(chunk)
		b.ResetTimer()
		for range b.N {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		c.(interface{ CloseWrite() error }).CloseWrite()
	}
	b.Run("listener", func(b *testing.B) {
		a, r := newStack(b, clientAddr), newStack(b, routerAddr)
		connect(b, a, r)
		ln, err := r.ListenTCP(netip.AddrPortFrom(routerAddr, 5001))
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if c, err := ln.Accept(); err == nil {
				io.Copy(io.Discard, c)
				c.Close()
			}
		}()
		c, err := a.DialTCP(testCtx(b, time.Minute), netip.AddrPort{}, netip.AddrPortFrom(routerAddr, 5001))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, c)
		<-done
	})
	b.Run("forwarder", func(b *testing.B) {
		port := server(b, func(c net.Conn) { io.Copy(io.Discard, c) })
		p := newPair(b, ForwarderConfig{})
		c, err := p.client.DialTCP(testCtx(b, time.Minute), netip.AddrPort{}, dst(port))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, c)
	})
	b.Run("forwarder-8flows", func(b *testing.B) {
		port := server(b, func(c net.Conn) { io.Copy(io.Discard, c) })
		p := newPair(b, ForwarderConfig{})
		conns := make([]net.Conn, 8)
		for i := range conns {
			c, err := p.client.DialTCP(testCtx(b, time.Minute), netip.AddrPort{}, dst(port))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			conns[i] = c
		}
		parallelWrites(b, conns, chunk)
	})
}

// parallelWrites writes b.N chunks spread over conns, one writer each,
// and half-closes them.
func parallelWrites(b *testing.B, conns []net.Conn, chunk int) {
	buf := make([]byte, chunk)
	b.SetBytes(int64(chunk))
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range conns {
		n := b.N / len(conns)
		if i < b.N%len(conns) {
			n++
		}
		wg.Go(func() {
			for range n {
				if _, err := c.Write(buf); err != nil {
					b.Error(err)
					return
				}
			}
			c.(interface{ CloseWrite() error }).CloseWrite()
		})
	}
	wg.Wait()
}
