package launcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/meshlaunch/meshlaunch/launcher"
)

// Roles: the test binary run, with roleEnv set, as a job inside the
// namespace or as a stand-alone launcher process (for signal tests).
const (
	roleEnv       = "MESHLAUNCH_TEST_ROLE"
	roleLauncher  = "launcher"
	roleInspect   = "inspect"
	roleUDPEcho   = "udp-echo"
	killGraceEnv  = "MESHLAUNCH_TEST_KILL_GRACE"
	echoPort      = 7777
	servicePort   = 5353
	echoWaitLimit = 20 * time.Second
)

func runRole(role string, args []string) int {
	switch role {
	case roleLauncher:
		return runLauncher(args)
	case roleInspect:
		return inspect()
	case roleUDPEcho:
		return udpEcho()
	}
	fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
	return 2
}

// runLauncher is a minimal `meshlaunch run`: the test network config, signal
// forwarding, the job's exit code as ours.
func runLauncher(argv []string) int {
	cfg := testConfig()
	cfg.ForwardSignals = true
	cfg.Env = withoutRole(os.Environ())
	if g, err := time.ParseDuration(os.Getenv(killGraceEnv)); err == nil {
		cfg.KillGrace = g
	}
	ctx := context.Background()
	j, err := launcher.Start(ctx, cfg, argv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer j.TUN().Close()
	if err := j.Go(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		j.Close()
		return 1
	}
	code, err := j.Wait()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func withoutRole(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, roleEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// report is what the inspect role prints.
type report struct {
	UID, GID     int
	Caps         map[string]string // CapInh, CapPrm, CapEff, CapAmb
	PodIPEnv     string
	TunAddrs     []string
	TunMTU       int
	Routes       []string // destination/mask of routes through the TUN
	ResolvConf   string
	PID1Cmdline  string
	PID          int
	Hostname     string
	HostnameErr  string
	InterfaceErr string
}

func inspect() int {
	r := report{UID: os.Getuid(), GID: os.Getgid(), PodIPEnv: os.Getenv("MESHLAUNCH_POD_IP"), PID: os.Getpid()}
	r.Caps = readCaps()
	r.TunAddrs, r.TunMTU, r.InterfaceErr = tunInfo()
	r.Routes = tunRoutes()
	b, _ := os.ReadFile("/etc/resolv.conf")
	r.ResolvConf = string(b)
	b, _ = os.ReadFile("/proc/1/cmdline")
	r.PID1Cmdline = strings.ReplaceAll(string(b), "\x00", " ")
	r.Hostname, _ = os.Hostname()
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

func readCaps() map[string]string {
	caps := map[string]string{}
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.HasPrefix(k, "Cap") {
			caps[k] = strings.TrimSpace(v)
		}
	}
	return caps
}

func tunInfo() (addrs []string, mtu int, errText string) {
	ifc, err := net.InterfaceByName(launcher.DefaultTunName)
	if err != nil {
		return nil, 0, err.Error()
	}
	as, err := ifc.Addrs()
	if err != nil {
		return nil, 0, err.Error()
	}
	for _, a := range as {
		addrs = append(addrs, a.String())
	}
	return addrs, ifc.MTU, ""
}

// tunRoutes reads /proc/net/route (hex, little-endian) for the TUN.
func tunRoutes() []string {
	b, _ := os.ReadFile("/proc/net/route")
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[0] != launcher.DefaultTunName {
			continue
		}
		dst, mask := hexAddr(f[1]), hexAddr(f[7])
		bits, _ := net.IPMask(mask.AsSlice()).Size()
		out = append(out, netip.PrefixFrom(dst, bits).String())
	}
	return out
}

func hexAddr(h string) netip.Addr {
	var v uint32
	fmt.Sscanf(h, "%X", &v)
	return netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
}

// udpEcho sends "ping" from the pod IP to the service address, then prints
// the first datagram it receives.
func udpEcho() int {
	pod := netip.MustParseAddr(os.Getenv("MESHLAUNCH_POD_IP"))
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(pod, echoPort)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	svc := net.UDPAddrFromAddrPort(netip.AddrPortFrom(serviceAddr, servicePort))
	if _, err := c.WriteToUDP([]byte("ping"), svc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c.SetReadDeadline(time.Now().Add(echoWaitLimit))
	buf := make([]byte, 1500)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("got %s from %s\n", buf[:n], from)
	return 0
}
