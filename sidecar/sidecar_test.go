package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/policy"
	"github.com/meshlaunch/meshlaunch/wsproxy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// running is a sidecar serving on loopback, stopped in cleanup.
type running struct {
	sc   *Sidecar
	base string // http://127.0.0.1:port
	stop context.CancelFunc
	done chan error
}

func startSidecar(t *testing.T, mod func(*Config)) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startSidecarOn(t, ln, mod)
}

// startSidecarOn is startSidecar serving on ln, which it closes.
func startSidecarOn(t *testing.T, ln net.Listener, mod func(*Config)) *running {
	t.Helper()
	rc := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(rc, []byte("nameserver 127.0.0.53\nsearch default.svc.cluster.local svc.cluster.local\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Secret:        meshtest.Secret,
		PodIP:         meshtest.JobAddr,
		Routes:        []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		ResolvConf:    rc,
		ShutdownGrace: 2 * time.Second,
	}
	if os.Getenv("SIDECAR_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&cfg)
	}
	sc, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{sc: sc, base: "http://" + ln.Addr().String(), stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- sc.Serve(ctx, ln) }()
	t.Cleanup(func() { r.shutdown(t) })
	waitHTTP(t, r.base+"/readyz", http.StatusOK)
	return r
}

func (r *running) shutdown(t *testing.T) {
	r.stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Serve returned %v after shutdown, want nil", err)
		}
		r.done <- err // later callers see it too
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not stop")
	}
}

func (r *running) meshURL(t *testing.T) *meshtest.JobOptions {
	u, err := wsproxy.ParseServerURL(strings.Replace(r.base, "http", "ws", 1) + meshapi.MeshPath)
	if err != nil {
		t.Fatal(err)
	}
	return &meshtest.JobOptions{URL: u}
}

func waitHTTP(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %d (last: %v)", url, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startJob(t *testing.T, r *running) *meshtest.Job {
	t.Helper()
	job := meshtest.StartJob(t, *r.meshURL(t))
	job.WaitReady(t, 10*time.Second)
	return job
}

func TestConfigAPIThroughTheTunnel(t *testing.T) {
	r := startSidecar(t, func(c *Config) { c.Expose = []Port{{Num: freePort(t), Proto: "tcp"}} })
	job := startJob(t, r)
	hc := http.Client{Transport: &http.Transport{DialContext: job.Stack.DialContext}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + meshapi.DefaultServiceAddr.String() + meshapi.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cfg meshapi.JobConfig
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Address != meshtest.JobAddr || len(cfg.Routes) != 1 || cfg.DNS.Ndots != 5 ||
		cfg.DNS.Nameserver != meshapi.DefaultServiceAddr || len(cfg.DNS.Search) != 2 || len(cfg.Expose) != 1 {
		t.Fatalf("config %+v", cfg)
	}
}

func TestEgressPolicyWithPositiveControl(t *testing.T) {
	allowed := meshtest.EchoTCP(t)
	other := meshtest.EchoTCP(t)
	r := startSidecar(t, func(c *Config) {
		rule, err := policy.ParseRule(meshtest.TestNet.String() + ":" + itoa(allowed))
		if err != nil {
			t.Fatal(err)
		}
		c.Allow = []policy.Rule{rule}
		c.dial = meshtest.LoopbackDialer()
	})
	job := startJob(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := job.Stack.DialContext(ctx, "tcp", meshtest.TestAddr(allowed).String())
	if err != nil {
		t.Fatalf("allowed destination: %v", err)
	}
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("echo %q %v", buf, err)
	}
	c.Close()
	// Mapped and NAT64 forms of loopback never leave an IPv4 job, so they
	// are covered where they are classified: package policy's tests.
	cases := map[string]string{
		meshtest.TestAddr(other).String():                 "not_allowed",
		"169.254.169.254:80":                              "metadata",
		netip.AddrPortFrom(meshtest.JobAddr, 80).String(): "",
	}
	for dst, reason := range cases {
		if reason == "" {
			continue // the job's own address never leaves the job
		}
		start := time.Now()
		c, err := job.Stack.DialContext(ctx, "tcp", dst)
		if err == nil {
			c.Close()
			t.Fatalf("%s: denied destination reached", dst)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > 2*time.Second {
			t.Fatalf("%s: %v after %s, want a fast refusal", dst, err, time.Since(start))
		}
	}
	denied := r.sc.stack.Stats().Denied
	for _, reason := range cases {
		if reason != "" && denied[reason] == 0 {
			t.Errorf("no denial counted as %q: %v", reason, denied)
		}
	}
	body := get(t, r.base+"/metrics", "")
	if !strings.Contains(body, `meshlaunch_flows_denied_total{reason="metadata"} 1`) {
		t.Fatalf("metrics lack the metadata denial:\n%s", grep(body, "denied"))
	}
}

func TestIngressKeepsClientAddress(t *testing.T) {
	port := freePort(t)
	r := startSidecar(t, func(c *Config) { c.Expose = []Port{{Num: port, Proto: "tcp"}, {Num: port, Proto: "udp"}} })
	job := startJob(t, r)
	ln, err := job.Stack.ListenTCP(netip.AddrPortFrom(meshtest.JobAddr, port))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, c.RemoteAddr().String())
	}()
	c, err := net.Dial("tcp", "127.0.0.1:"+itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	// A client on the pod's loopback appears as the service address with
	// its own port (the namespace tier checks real client addresses).
	want := netip.AddrPortFrom(meshapi.DefaultServiceAddr, uint16(c.LocalAddr().(*net.TCPAddr).Port)).String()
	if string(got) != want {
		t.Fatalf("the job saw %q, want %s", got, want)
	}

	pc, err := job.Stack.ListenUDP(netip.AddrPortFrom(meshtest.JobAddr, port))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 1500)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo(append(buf[:n:n], []byte(" from "+from.String())...), from)
	}()
	u, err := net.Dial("udp", "127.0.0.1:"+itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	_ = u.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := u.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	n, err := u.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	want = "ping from " + netip.AddrPortFrom(meshapi.DefaultServiceAddr, uint16(u.LocalAddr().(*net.UDPAddr).Port)).String()
	if string(buf[:n]) != want {
		t.Fatalf("udp reply %q, want %q", buf[:n], want)
	}
}

func TestStatusNeedsTheCredential(t *testing.T) {
	r := startSidecar(t, nil)
	startJob(t, r)
	id, _ := identity.Derive(meshtest.Secret)
	// The responder records a handshake when the first packet under the
	// new keys arrives, shortly after the job saw the response.
	var st meshapi.Status
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := json.Unmarshal([]byte(get(t, r.base+meshapi.StatusPath, id.Credential)), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Peers) == 1 && !st.Peers[0].LastHandshake.IsZero() || time.Now().After(deadline) {
			break
		}
	}
	var cfg meshapi.JobConfig
	if err := json.Unmarshal([]byte(get(t, r.base+meshapi.ConfigPath, id.Credential)), &cfg); err != nil || cfg.Address != meshtest.JobAddr {
		t.Fatalf("config on the listener: %+v %v", cfg, err)
	}
	if !st.Ready || st.PodIP != meshtest.JobAddr || len(st.Peers) != 1 || st.Peers[0].LastHandshake.IsZero() || !st.Peers[0].Connected {
		t.Fatalf("status %+v", st)
	}
	for _, path := range []string{meshapi.StatusPath, meshapi.ConfigPath} {
		resp, err := http.Get(r.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s without credential: %d", path, resp.StatusCode)
		}
	}
	if m := get(t, r.base+"/metrics", ""); !strings.Contains(m, `meshlaunch_auth_failures_total{endpoint="api"} 2`) {
		t.Fatalf("API refusals not counted:\n%s", grep(m, "auth_failures"))
	}
}

func TestShutdownDrainsThenClosesSessions(t *testing.T) {
	port := meshtest.EchoTCP(t)
	r := startSidecar(t, func(c *Config) { c.dial = meshtest.LoopbackDialer() })
	job := startJob(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flow, err := job.Stack.DialContext(ctx, "tcp", meshtest.TestAddr(port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer flow.Close()
	echoOnce := func(msg string) error {
		if _, err := flow.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		_ = flow.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadFull(flow, buf)
		return err
	}
	if err := echoOnce("established"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.stop()
	// While the flow drains the sidecar is up but not ready, and refuses
	// new sessions; the established flow still works.
	waitHTTP(t, r.base+"/readyz", http.StatusServiceUnavailable)
	if err := echoOnce("still"); err != nil {
		t.Fatalf("established flow broke during the drain: %v", err)
	}
	resp, err := http.Get(strings.Replace(r.meshURL(t).URL.String(), "ws", "http", 1))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("new session during the drain: %d, want 503", resp.StatusCode)
		}
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
		r.done <- err
	case <-time.After(15 * time.Second):
		t.Fatal("sidecar did not stop")
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("stopped after %s, before the 2 s grace, with a flow open", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for job.Client.Stats().Connected && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if job.Client.Stats().Connected {
		t.Fatal("the launcher's websocket stayed up after shutdown")
	}
}

func TestBadConfigurationFailsAtStart(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"short secret", func(c *Config) { c.Secret = "short" }, "secret"},
		{"no pod IP", func(c *Config) { c.PodIP = netip.Addr{} }, "pod IP"},
		{"loopback pod IP", func(c *Config) { c.PodIP = netip.MustParseAddr("127.0.0.1") }, "pod IP"},
		{"MTU too small", func(c *Config) { c.MTU = 500 }, "MTU 500"},
		{"missing resolv.conf", func(c *Config) { c.ResolvConf = "/nonexistent/resolv.conf" }, "resolv"},
		{"exposed port is the listener's", func(c *Config) {
			c.ListenPort = 8080
			c.Expose = []Port{{Num: 8080, Proto: "tcp"}}
		}, "listener's own port"},
		{"peers without a key", func(c *Config) { c.Peers = []Peer{{}} }, "private key"},
		{"key without peers", func(c *Config) { c.PrivateKey, _ = identity.NewPrivateKey() }, "at least one --peer"},
		{"two peers, no addresses", func(c *Config) {
			c.PrivateKey, _ = identity.NewPrivateKey()
			a, _ := identity.NewPrivateKey()
			b, _ := identity.NewPrivateKey()
			c.Peers = []Peer{{PublicKey: a.Public()}, {PublicKey: b.Public()}}
		}, "each needs =ADDR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Secret: meshtest.Secret, PodIP: meshtest.JobAddr, ResolvConf: "/etc/resolv.conf"}
			tc.mod(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func get(t *testing.T, url, cred string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Skipf("port %s not free for udp", ln.Addr())
	}
	pc.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

func TestExplicitPeers(t *testing.T) {
	sk, _ := identity.NewPrivateKey()
	ka, _ := identity.NewPrivateKey()
	kb, _ := identity.NewPrivateKey()
	addrA, addrB := netip.MustParseAddr("10.244.9.1"), netip.MustParseAddr("10.244.9.2")
	port := meshtest.EchoTCP(t)
	r := startSidecar(t, func(c *Config) {
		c.PrivateKey = sk
		c.Peers = []Peer{{PublicKey: ka.Public(), Addr: addrA}, {PublicKey: kb.Public(), Addr: addrB}}
		c.dial = meshtest.LoopbackDialer()
	})
	join := func(k identity.PrivateKey, addr netip.Addr) *meshtest.Job {
		keys := identity.Identity{SidecarKey: sk, PeerKey: k}
		opt := *r.meshURL(t)
		opt.Keys, opt.Addr = &keys, addr
		opt.Client = func(c *wsproxy.ClientConfig) {
			c.Header = http.Header{PeerHeader: {k.Public().String()}}
		}
		j := meshtest.StartJob(t, opt)
		j.WaitReady(t, 10*time.Second)
		return j
	}
	a := join(ka, addrA)
	b := join(kb, addrB)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, j := range map[string]*meshtest.Job{"a": a, "b": b} {
		c, err := j.Stack.DialContext(ctx, "tcp", meshtest.TestAddr(port).String())
		if err != nil {
			t.Fatalf("peer %s: %v", name, err)
		}
		c.Close()
	}
	if st := r.sc.server.Stats(); st.Sessions != 2 || st.Replaced != 0 {
		t.Fatalf("two peers' sessions: %+v", st)
	}
	// Peer-to-peer is denied; the same dial to an allowed place works above.
	if c, err := a.Stack.DialContext(ctx, "tcp", netip.AddrPortFrom(addrB, 80).String()); err == nil {
		c.Close()
		t.Fatal("peer a reached peer b")
	}
	if r.sc.stack.Stats().Denied["peer"] == 0 {
		t.Fatalf("peer-to-peer not counted: %v", r.sc.stack.Stats().Denied)
	}
	// The config API tells each peer its own address.
	hc := http.Client{Transport: &http.Transport{DialContext: b.Stack.DialContext}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + meshapi.DefaultServiceAddr.String() + meshapi.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cfg meshapi.JobConfig
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil || cfg.Address != addrB {
		t.Fatalf("peer b's config: %+v, %v", cfg, err)
	}
}

func TestParsePeer(t *testing.T) {
	k, _ := identity.NewPrivateKey()
	pub := k.Public().String()
	for _, tc := range []struct {
		in   string
		addr string
		bad  bool
	}{
		{pub, "", false},
		{pub + "=10.244.9.1", "10.244.9.1", false},
		{pub + "=not-an-ip", "", true},
		{"short=10.0.0.1", "", true},
	} {
		p, err := ParsePeer(tc.in)
		if (err != nil) != tc.bad {
			t.Fatalf("ParsePeer(%q) = %v", tc.in, err)
		}
		if err == nil && (p.PublicKey.String() != pub || (tc.addr != "" && p.Addr.String() != tc.addr)) {
			t.Fatalf("ParsePeer(%q) = %+v", tc.in, p)
		}
	}
}

func TestIngressWithoutJobResetsAtOnce(t *testing.T) {
	port := freePort(t)
	startSidecar(t, func(c *Config) { c.Expose = []Port{{Num: port, Proto: "tcp"}} })
	start := time.Now()
	c, err := net.Dial("tcp", "127.0.0.1:"+itoa(port))
	if errors.Is(err, syscall.ECONNRESET) {
		return // reset before the dial even returned: at once
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || time.Since(start) > time.Second {
		t.Fatalf("read = %v after %s; want a reset at once when no job is connected", err, time.Since(start))
	}
}
