// Package conntest wraps connections for tests that must see what a
// server or a client does on the wire.
package conntest

import (
	"net"
	"sync/atomic"
)

// Counts are what the connections sharing them did: the bytes they read
// and the Write calls they made (each one a syscall on a TCP socket).
type Counts struct {
	BytesRead atomic.Int64
	Writes    atomic.Int64
}

// Conn counts into C what the wrapped connection reads and writes.
type Conn struct {
	net.Conn
	C *Counts
}

func (c Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.C.BytesRead.Add(int64(n))
	return n, err
}

func (c Conn) Write(p []byte) (int, error) {
	c.C.Writes.Add(1)
	return c.Conn.Write(p)
}

// Listener wraps every accepted connection in a Conn counting into C.
type Listener struct {
	net.Listener
	C *Counts
}

func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Conn{Conn: c, C: l.C}, nil
}
