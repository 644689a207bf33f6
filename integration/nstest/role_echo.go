package nstest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"time"
)

// runTCPEcho echoes every connection on ADDR back to its sender and
// half-closes once the sender has.
func runTCPEcho(args []string) error {
	if len(args) != 1 {
		return usage("tcpecho ADDR", args)
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("tcpecho listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		go echoTCP(c.(*net.TCPConn))
	}
}

func echoTCP(c *net.TCPConn) {
	defer c.Close()
	if _, err := io.Copy(c, c); err == nil {
		_ = c.CloseWrite()
	}
}

// runUDPEcho sends every datagram received on ADDR back to its sender.
func runUDPEcho(args []string) error {
	if len(args) != 1 {
		return usage("udpecho ADDR", args)
	}
	pc, err := net.ListenPacket("udp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("udpecho listening on %s\n", pc.LocalAddr())
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if _, err := pc.WriteTo(buf[:n], from); err != nil {
			fmt.Printf("udpecho: reply to %s: %v\n", from, err)
		}
	}
}

// runEchoCheck sends one message to the echo server at ADDR over tcp or
// udp and checks that it comes back unchanged within 5 s.
func runEchoCheck(args []string) error {
	if len(args) != 2 || (args[0] != "tcp" && args[0] != "udp") {
		return usage("echocheck tcp|udp ADDR", args)
	}
	c, err := net.DialTimeout(args[0], args[1], 5*time.Second)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	msg := []byte("nstest echo " + args[0] + " " + c.LocalAddr().String())
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got := make([]byte, len(msg)+1) // a spare byte shows an overlong datagram
	n, err := io.ReadAtLeast(c, got, len(msg))
	if err != nil {
		return fmt.Errorf("read echo: %w (got %q)", err, got[:n])
	}
	if !bytes.Equal(got[:n], msg) {
		return fmt.Errorf("echo %q, want %q", got[:n], msg)
	}
	fmt.Printf("%s\n", got[:n])
	return nil
}
