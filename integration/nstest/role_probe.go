package nstest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

// runProbe retries a TCP connect to ADDR until one succeeds (exit 0) or
// TIMEOUT (a Go duration) has passed.
func runProbe(args []string) error {
	if len(args) != 2 {
		return usage("probe ADDR TIMEOUT", args)
	}
	timeout, err := time.ParseDuration(args[1])
	if err != nil {
		return fmt.Errorf("timeout: %w", err)
	}
	deadline := time.Now().Add(timeout)
	err = errors.New("timeout before the first attempt")
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("connect %s: %w", args[0], err)
		}
		var c net.Conn
		if c, err = net.DialTimeout("tcp", args[0], min(left, time.Second)); err == nil {
			return c.Close()
		}
		time.Sleep(min(50*time.Millisecond, time.Until(deadline)))
	}
}

// runDNSQuery asks the DNS server SERVER (host:port, UDP) for NAME until
// it answers or TIMEOUT has passed. It prints one address per line, or
// NXDOMAIN, which also counts as an answer.
func runDNSQuery(args []string) error {
	if len(args) != 3 {
		return usage("dnsq SERVER NAME TIMEOUT", args)
	}
	server, name := args[0], args[1]
	timeout, err := time.ParseDuration(args[2])
	if err != nil {
		return fmt.Errorf("timeout: %w", err)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), min(time.Second, max(time.Until(deadline), time.Millisecond)))
		addrs, err := r.LookupNetIP(ctx, "ip", name)
		cancel()
		var dnsErr *net.DNSError
		switch {
		case err == nil:
			for _, a := range addrs {
				fmt.Println(a)
			}
			return nil
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			fmt.Println("NXDOMAIN")
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("query %s at %s: %w", name, server, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runUpgradeProbe requests an upgrade to UpgradeProtocol at URL (http or
// https, verified against the PEM CA in CAFILE) and checks that a line
// comes back unchanged: what a websocket needs from the proxies between.
func runUpgradeProbe(args []string) error {
	if len(args) != 1 && len(args) != 2 {
		return usage("upgrade URL [CAFILE]", args)
	}
	u, err := url.Parse(args[0])
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	conn, err := dialURL(u, args[1:])
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	return upgradeEcho(conn, u)
}

// dialURL connects to u's host, with TLS for https.
func dialURL(u *url.URL, caFile []string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	switch u.Scheme {
	case "http", "ws":
		return d.Dial("tcp", hostPort(u, "80"))
	case "https", "wss":
		cfg := &tls.Config{ServerName: u.Hostname()}
		if len(caFile) == 1 {
			pool, err := loadCAPool(caFile[0])
			if err != nil {
				return nil, err
			}
			cfg.RootCAs = pool
		}
		return tls.DialWithDialer(d, "tcp", hostPort(u, "443"), cfg)
	}
	return nil, fmt.Errorf("scheme %q: want http, https, ws or wss", u.Scheme)
}

func hostPort(u *url.URL, defaultPort string) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), defaultPort)
}

func loadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", path)
	}
	return pool, nil
}

// upgradeEcho sends the upgrade request over conn, expects 101 and one
// echoed line.
func upgradeEcho(conn net.Conn, u *url.URL) error {
	_, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n",
		u.RequestURI(), u.Host, UpgradeProtocol)
	if err != nil {
		return fmt.Errorf("send upgrade request: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("read upgrade response: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fmt.Errorf("upgrade answered %s", resp.Status)
	}
	const ping = "nstest ping\n"
	if _, err := conn.Write([]byte(ping)); err != nil {
		return fmt.Errorf("write after upgrade: %w", err)
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if line != ping {
		return fmt.Errorf("echo %q, want %q", line, ping)
	}
	fmt.Print(line)
	return nil
}
