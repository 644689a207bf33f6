package nstest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ProxyAddr is where StartProxy's HTTP proxy listens, in edge.
const ProxyAddr = EdgeNodeIP + ":3128"

// Proxy is tinyproxy in the edge namespace: an HTTP proxy with Basic
// authentication that allows CONNECT to ports 443 and 80, for clients in
// NodeCIDR only.
type Proxy struct {
	URL  string // "http://user:pass@198.18.0.1:3128"
	Addr string // ProxyAddr
	Proc *Proc
}

// StartProxy starts tinyproxy in edge as nobody and waits for its port.
// user and pass must be non-empty and free of spaces and quotes (tinyproxy's
// config syntax). It skips t if tinyproxy is not installed.
func (tp *Topology) StartProxy(t testing.TB, user, pass string) *Proxy {
	t.Helper()
	bin := lookPathOrSkip(t, "tinyproxy", "tinyproxy")
	for _, s := range []string{user, pass} {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"'#:") {
			t.Fatalf("nstest: proxy credential %q: want non-empty, no spaces, quotes, # or :", s)
		}
	}
	dir := SharedDir(t, "nstest-proxy-")
	conf := filepath.Join(dir, "tinyproxy.conf")
	if err := os.WriteFile(conf, []byte(tinyproxyConf(user, pass)), 0o644); err != nil {
		t.Fatalf("nstest: write tinyproxy config: %v", err)
	}
	p := tp.Start(t, tp.Edge, ProcOpts{User: "nobody"}, bin, "-d", "-c", conf)
	tp.WaitTCP(t, tp.Edge, ProxyAddr, 10*time.Second)
	u := url.URL{Scheme: "http", User: url.UserPassword(user, pass), Host: ProxyAddr}
	return &Proxy{URL: u.String(), Addr: ProxyAddr, Proc: p}
}

// tinyproxyConf: no User/Group lines because it already runs as nobody;
// it logs to stderr in the foreground (-d).
func tinyproxyConf(user, pass string) string {
	host, port, _ := net.SplitHostPort(ProxyAddr)
	return fmt.Sprintf(`Port %s
Listen %s
Timeout 600
MaxClients 200
Allow %s
BasicAuth %s %s
ConnectPort 443
ConnectPort 80
DisableViaHeader Yes
LogLevel Info
`, port, host, NodeCIDR, user, pass)
}
