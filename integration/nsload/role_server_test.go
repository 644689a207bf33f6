package nsload

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// runSumServer serves the load protocol on ADDR until SIGTERM: an echo
// or an upload digest per connection (wire_test.go). It prints a line
// once it listens.
func runSumServer(args []string) error {
	if len(args) != 1 {
		return usage("sumserver ADDR", args)
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("sumserver listening on %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	context.AfterFunc(ctx, func() { ln.Close() })
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil // closed by the signal
		}
		wg.Go(func() { serveLoad(c) })
	}
}

// serveLoad answers one connection; a client that breaks the protocol
// is logged to stderr and dropped.
func serveLoad(c net.Conn) {
	defer c.Close()
	h, err := readHeader(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sumserver: %s: %v\n", c.RemoteAddr(), err)
		return
	}
	switch h.mode {
	case modeEcho:
		if _, err := io.Copy(c, c); err == nil {
			_ = closeWrite(c)
		}
	case modeUpload:
		sum := sha256.New()
		n, err := io.Copy(sum, c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sumserver: %s: read body: %v\n", c.RemoteAddr(), err)
			return
		}
		_, _ = c.Write(binary.BigEndian.AppendUint64(sum.Sum(nil), uint64(n)))
	case modeDownload:
		if err := writeBody(c, h.seed, 0, h.size); err != nil {
			fmt.Fprintf(os.Stderr, "sumserver: %s: %v\n", c.RemoteAddr(), err)
			return
		}
		_ = closeWrite(c)
		_, _ = io.Copy(io.Discard, c) // until the client closes
	}
}
