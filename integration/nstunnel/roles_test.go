package nstunnel

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// roles are this package's helpers, run by a copy of the test binary with
// $NSTUNNEL_ROLE set; each gets the arguments after argv[0].
var roles = map[string]func(args []string) error{
	"relay":     runRelay,     // LISTEN TARGET: TCP relay; SIGUSR1 resets every connection
	"proxyline": runProxyLine, // ADDR: HTTP server answering the PROXY line it received
}

// runRole runs a role and returns the process exit status.
func runRole(role string, args []string) int {
	fn, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "nstunnel: unknown role %q\n", role)
		return 2
	}
	if err := fn(args); err != nil {
		fmt.Fprintf(os.Stderr, "nstunnel: role %s: %v\n", role, err)
		return 1
	}
	return 0
}

// relay forwards every connection it accepts to a target. On SIGUSR1 it
// resets all of them, both sides, with SO_LINGER 0 (a carrier that breaks
// without a FIN) and prints "relay reset N connections".
type relay struct {
	target string
	mu     sync.Mutex
	conns  map[*net.TCPConn]*net.TCPConn // accepted -> dialled
}

func runRelay(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: relay LISTEN TARGET (got %q)", args)
	}
	r := &relay{target: args[1], conns: map[*net.TCPConn]*net.TCPConn{}}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1) // before "listening": the test may signal at once
	go func() {
		for range sig {
			fmt.Printf("relay reset %d connections\n", r.resetAll())
		}
	}()
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("relay listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		go r.serve(c.(*net.TCPConn))
	}
}

func (r *relay) serve(down *net.TCPConn) {
	c, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relay: dial %s: %v\n", r.target, err)
		reset(down)
		return
	}
	up := c.(*net.TCPConn)
	r.mu.Lock()
	r.conns[down] = up
	r.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src *net.TCPConn) {
		_, _ = io.Copy(dst, src)
		_ = dst.CloseWrite()
		done <- struct{}{}
	}
	go pipe(up, down)
	go pipe(down, up)
	<-done
	<-done
	r.mu.Lock()
	delete(r.conns, down)
	r.mu.Unlock()
	down.Close()
	up.Close()
}

// resetAll resets every relayed connection on both sides and returns how
// many there were.
func (r *relay) resetAll() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.conns)
	for down, up := range r.conns {
		reset(down)
		reset(up)
		delete(r.conns, down)
	}
	return n
}

// reset closes c with a RST instead of a FIN.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// runProxyLine serves HTTP/1.0-style on ADDR: it reads the first line of
// each connection (the PROXY protocol header when the tunnel sends one),
// then the request up to its blank line, and answers 200 with that first
// line as the body.
func runProxyLine(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: proxyline ADDR (got %q)", args)
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("proxyline listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		go answerFirstLine(c)
	}
}

func answerFirstLine(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	first, err := br.ReadString('\n')
	if err != nil {
		return
	}
	first = strings.TrimRight(first, "\r\n")
	fmt.Printf("first line: %s\n", first)
	// Read the rest of the request so that closing sends a FIN, not a
	// RST for unread data. Without a PROXY line the first line was the
	// request line itself.
	for {
		line, err := br.ReadString('\n')
		if err != nil || strings.TrimRight(line, "\r\n") == "" {
			break
		}
	}
	_, _ = fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(first), first)
}
