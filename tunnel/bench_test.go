package tunnel

import (
	"io"
	"net"
	"testing"
)

// BenchmarkThroughput reports one stream's throughput on loopback through
// -L, next to raw loopback TCP in the same run, for comparison (nothing
// is asserted). Run: go test -run - -bench Throughput ./tunnel/
func BenchmarkThroughput(b *testing.B) {
	sink := serveTCP(b, "127.0.0.1:0", func(c *net.TCPConn) {
		_, _ = io.Copy(io.Discard, c)
		_, _ = c.Write([]byte{1}) // acknowledges the end of the stream
	})
	b.Run("raw-loopback", func(b *testing.B) {
		benchStream(b, loopback(sink).String())
	})
	b.Run("tunnel-L", func(b *testing.B) {
		ts := newTestServer(b, nil)
		c, _ := newTestClient(b, ts.url, testCred)
		local := freePort(b, "tcp")
		runClient(b, c, []Forward{fwd(b, ParseLocal, "%d:127.0.0.1:%d", local, sink)}, nil, nil)
		dialRetry(b, "tcp", loopback(local).String()).Close()
		benchStream(b, loopback(local).String())
	})
}

// benchStream writes b.N chunks of 1 MiB on one connection, half-closes
// and waits until the sink has read everything.
func benchStream(b *testing.B, addr string) {
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	b.SetBytes(chunk)
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}
