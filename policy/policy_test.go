package policy

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

const podIP = "10.244.1.5"

// sidecarConfig is a typical sidecar: its pod IP, a peer range, no rules.
func sidecarConfig() Config {
	return Config{
		Self:  addrs(podIP, "fd00:10:244::5"),
		Peers: []netip.Prefix{netip.MustParsePrefix("10.7.0.0/24")},
	}
}

func TestCheckDefaultDenies(t *testing.T) {
	p := New(sidecarConfig())
	var cases []flowCase
	for _, network := range []string{"tcp", "udp"} {
		cases = append(cases,
			flowCase{network, "10.96.0.10:80", ""}, // positive control
			flowCase{network, "[2001:db8::1]:80", ""},
			flowCase{network, "[fd00::1]:53", ""},
			flowCase{network, "127.0.0.1:80", ReasonLoopback},
			flowCase{network, "127.1.2.3:80", ReasonLoopback},
			flowCase{network, "[::1]:80", ReasonLoopback},
			flowCase{network, "[::ffff:127.0.0.1]:80", ReasonLoopback},
			flowCase{network, "[::127.0.0.1]:80", ReasonLoopback},
			flowCase{network, "[64:ff9b::7f00:1]:80", ReasonLoopback},
			flowCase{network, "0.0.0.0:80", ReasonUnspecified},
			flowCase{network, "0.0.0.1:80", ReasonUnspecified},
			flowCase{network, "[::]:80", ReasonUnspecified},
			flowCase{network, "[::ffff:0.0.0.0]:80", ReasonUnspecified},
			flowCase{network, "169.254.169.254:80", ReasonMetadata},
			flowCase{network, "[::ffff:169.254.169.254]:80", ReasonMetadata},
			flowCase{network, "[fd00:ec2::254]:80", ReasonMetadata},
			flowCase{network, "169.254.1.1:80", ReasonLinkLocal},
			flowCase{network, "[fe80::1%eth0]:80", ReasonLinkLocal},
			flowCase{network, "[fe80::1]:80", ReasonLinkLocal},
			flowCase{network, "224.0.0.1:80", ReasonMulticast},
			flowCase{network, "[ff02::1]:80", ReasonMulticast},
			flowCase{network, "255.255.255.255:80", ReasonBroadcast},
			flowCase{network, "240.0.0.1:80", ReasonReserved},
			flowCase{network, podIP + ":80", ReasonSelf},
			flowCase{network, "[::ffff:" + podIP + "]:80", ReasonSelf},
			flowCase{network, "[64:ff9b::af4:105]:80", ReasonSelf}, // NAT64 form of the pod IP
			flowCase{network, "[fd00:10:244::5]:80", ReasonSelf},
			flowCase{network, "10.244.1.6:80", ""}, // the pod's neighbour: control for self
			flowCase{network, "10.7.0.2:80", ReasonPeer},
			flowCase{network, "10.7.1.2:80", ""}, // outside the peer range: control for peer
		)
	}
	cases = append(cases,
		flowCase{"icmp", "10.96.0.10:0", ""},
		flowCase{"icmp", "127.0.0.1:0", ReasonLoopback},
		flowCase{"icmp", "[::ffff:127.0.0.1]:0", ReasonLoopback},
		flowCase{"icmp", "169.254.169.254:0", ReasonMetadata},
		flowCase{"icmp", "255.255.255.255:0", ReasonBroadcast},
		flowCase{"icmp", podIP + ":0", ReasonSelf},
		flowCase{"icmp", "10.7.0.2:0", ReasonPeer},
	)
	runFlows(t, p, cases)
}

func TestCheckInvalid(t *testing.T) {
	p := New(Config{})
	cases := []struct {
		name, network string
		dst           netip.AddrPort
		want          string
	}{
		{"control", "tcp", netip.MustParseAddrPort("10.0.0.1:80"), ""},
		{"invalid address", "tcp", netip.AddrPort{}, ReasonInvalid},
		{"unknown network", "sctp", netip.MustParseAddrPort("10.0.0.1:80"), ReasonInvalid},
		{"empty network", "", netip.MustParseAddrPort("10.0.0.1:80"), ReasonInvalid},
		{"tcp port 0", "tcp", netip.MustParseAddrPort("10.0.0.1:0"), ReasonInvalid},
		{"udp port 0", "udp", netip.MustParseAddrPort("10.0.0.1:0"), ReasonInvalid},
		{"icmp port ignored", "icmp", netip.MustParseAddrPort("10.0.0.1:7"), ""},
		{"tcp4 alias", "tcp4", netip.MustParseAddrPort("10.0.0.1:80"), ""},
		{"udp6 alias", "udp6", netip.MustParseAddrPort("[2001:db8::1]:53"), ""},
		{"alias still checked", "tcp6", netip.MustParseAddrPort("[::1]:80"), ReasonLoopback},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectReason(t, p, c.network, c.dst, c.want) })
	}
}

func TestAllowNarrowing(t *testing.T) {
	p := New(Config{Allow: mustRules(t, "10.96.0.0/12", "[fd00::/8]:53")})
	runFlows(t, p, []flowCase{
		{"tcp", "10.96.0.10:80", ""},
		{"tcp", "10.111.255.255:443", ""},
		{"tcp", "[::ffff:10.96.0.10]:80", ""},
		{"tcp", "10.112.0.1:80", ReasonNotAllowed},
		{"tcp", "1.1.1.1:443", ReasonNotAllowed},
		{"udp", "[fd00::10]:53", ""},
		{"udp", "[fd00::10]:54", ReasonNotAllowed},
		{"tcp", "[2001:db8::1]:53", ReasonNotAllowed},
		// An IPv4 rule does not admit a translator form of its addresses.
		{"tcp", "[64:ff9b::a60:a]:80", ReasonNotAllowed},
		// Built-in denies still apply with an allow list.
		{"tcp", "127.0.0.1:80", ReasonLoopback},
	})
}

func TestDenyPrecedence(t *testing.T) {
	p := New(Config{
		Allow: mustRules(t, "10.0.0.0/8", "[::/0]:443", "127.0.0.1:9090"),
		Deny:  mustRules(t, "10.1.0.0/16", "10.2.0.0/16:22", "[2001:db8::/32]:443", "127.0.0.0/8:9090"),
	})
	runFlows(t, p, []flowCase{
		{"tcp", "10.3.0.1:22", ""},
		{"tcp", "10.1.0.1:80", ReasonDenyRule},
		{"icmp", "10.1.0.1:0", ReasonDenyRule},
		{"tcp", "10.2.0.1:22", ReasonDenyRule},
		{"tcp", "10.2.0.1:23", ""},
		{"icmp", "10.2.0.1:0", ""}, // port rule: ICMP not denied
		{"tcp", "[2001:db8::1]:443", ReasonDenyRule},
		{"tcp", "[2001:db9::1]:443", ""},
		// Deny beats an allow rule that lifts a class.
		{"tcp", "127.0.0.1:9090", ReasonDenyRule},
		// Deny rules see through translator forms.
		{"tcp", "[::ffff:10.1.0.1]:80", ReasonDenyRule},
		{"tcp", "[::10.1.0.1]:443", ReasonDenyRule},
		{"tcp", "[64:ff9b::a01:1]:443", ReasonDenyRule},
		{"tcp", "[64:ff9b::a03:1]:443", ""}, // control: allowed by [::/0]:443
	})
}

func TestDenyWithoutAllow(t *testing.T) {
	p := New(Config{Deny: mustRules(t, "192.168.0.0/16", "[::ffff:10.0.0.0/104]:25", "64:ff9b::/96")})
	runFlows(t, p, []flowCase{
		{"tcp", "8.8.8.8:53", ""},
		{"tcp", "192.168.1.1:80", ReasonDenyRule},
		{"tcp", "10.0.0.1:25", ReasonDenyRule}, // a mapped rule matches the IPv4 address
		{"tcp", "10.0.0.1:26", ""},
		{"tcp", "[64:ff9b::808:808]:53", ReasonDenyRule}, // denying the NAT64 prefix works
	})
}

func TestPortRanges(t *testing.T) {
	p := New(Config{Allow: mustRules(t, "10.0.0.0/8:80,443,8000-8999", "[fd00::/8]:53,5353")})
	runFlows(t, p, []flowCase{
		{"tcp", "10.0.0.1:80", ""},
		{"udp", "10.0.0.1:443", ""},
		{"tcp", "10.0.0.1:8000", ""},
		{"tcp", "10.0.0.1:8500", ""},
		{"tcp", "10.0.0.1:8999", ""},
		{"tcp", "10.0.0.1:7999", ReasonNotAllowed},
		{"tcp", "10.0.0.1:9000", ReasonNotAllowed},
		{"tcp", "10.0.0.1:81", ReasonNotAllowed},
		{"tcp", "10.0.0.1:1", ReasonNotAllowed},
		{"tcp", "10.0.0.1:65535", ReasonNotAllowed},
		{"udp", "[fd00::1]:5353", ""},
		{"udp", "[fd00::1]:5354", ReasonNotAllowed},
		{"tcp", "11.0.0.1:80", ReasonNotAllowed},
	})
}

func TestICMPAndPortRules(t *testing.T) {
	p := New(Config{Allow: mustRules(t, "10.0.0.0/8:80", "10.1.0.0/16", "[::1]:9090")})
	runFlows(t, p, []flowCase{
		{"tcp", "10.2.0.1:80", ""},
		{"icmp", "10.2.0.1:0", ReasonNotAllowed},  // only a port rule covers it
		{"icmp", "10.2.0.1:80", ReasonNotAllowed}, // even if the caller passes a port
		{"icmp", "[::1]:9090", ReasonLoopback},
		{"icmp", "10.1.0.1:0", ""},          // a rule without ports covers ICMP
		{"icmp", "[::1]:0", ReasonLoopback}, // a port rule never lifts a class for ICMP
		{"tcp", "[::1]:9090", ""},
	})
}

func TestLiftClass(t *testing.T) {
	t.Run("narrow allow lifts exactly", func(t *testing.T) {
		p := New(Config{Allow: mustRules(t, "127.0.0.1:9090", "[::1]:9090", "169.254.169.254:80", "[fe80::/64]:22")})
		runFlows(t, p, []flowCase{
			{"tcp", "127.0.0.1:9090", ""},
			{"tcp", "[::ffff:127.0.0.1]:9090", ""}, // the kernel dials the same address
			{"tcp", "[::1]:9090", ""},
			{"tcp", "127.0.0.1:9091", ReasonLoopback},
			{"tcp", "127.0.0.2:9090", ReasonLoopback},
			{"icmp", "127.0.0.1:0", ReasonLoopback},
			{"tcp", "[64:ff9b::7f00:1]:9090", ReasonLoopback}, // a translator's loopback is not ours
			{"tcp", "[::127.0.0.1]:9090", ReasonLoopback},
			{"tcp", "169.254.169.254:80", ""},
			{"tcp", "169.254.169.254:443", ReasonMetadata},
			{"tcp", "[fe80::1%eth0]:22", ""},
			{"tcp", "[fe80:0:0:1::1]:22", ReasonLinkLocal},
		})
	})
	t.Run("broad allow lifts nothing", func(t *testing.T) {
		p := New(Config{Allow: mustRules(t, "0.0.0.0/0", "::/0", "126.0.0.0/7", "169.254.0.0/16", "fd00::/8", "224.0.0.0/3")})
		runFlows(t, p, []flowCase{
			{"tcp", "10.96.0.10:80", ""}, // control: the allow list admits it
			{"tcp", "127.0.0.1:9090", ReasonLoopback},
			{"tcp", "[::1]:9090", ReasonLoopback},
			{"tcp", "0.0.0.0:80", ReasonUnspecified},
			{"tcp", "224.0.0.1:80", ReasonMulticast},
			{"tcp", "255.255.255.255:80", ReasonBroadcast},
			{"tcp", "169.254.169.254:80", ReasonMetadata}, // link-local allow does not lift metadata
			{"tcp", "169.254.1.1:80", ""},                 // but does lift link-local
			{"tcp", "[fd00:ec2::254]:80", ReasonMetadata},
			{"tcp", "[fd00::1]:80", ""},
		})
	})
	t.Run("self and peer are never lifted", func(t *testing.T) {
		cfg := sidecarConfig()
		cfg.Allow = mustRules(t, podIP, "10.7.0.2", "10.96.0.0/12")
		runFlows(t, New(cfg), []flowCase{
			{"tcp", "10.96.0.10:80", ""},
			{"tcp", podIP + ":80", ReasonSelf},
			{"tcp", "10.7.0.2:80", ReasonPeer},
		})
	})
	t.Run("self on loopback stays self", func(t *testing.T) {
		p := New(Config{Self: addrs("127.0.0.1"), Allow: mustRules(t, "127.0.0.0/8")})
		runFlows(t, p, []flowCase{
			{"tcp", "127.0.0.2:80", ""},
			{"tcp", "127.0.0.1:80", ReasonSelf},
		})
	})
}

func TestNilPolicy(t *testing.T) {
	var p *Policy
	expectReason(t, p, "tcp", netip.MustParseAddrPort("10.0.0.1:80"), "")
	expectReason(t, p, "tcp", netip.MustParseAddrPort("127.0.0.1:80"), ReasonLoopback)
}

func TestNewCopiesConfig(t *testing.T) {
	cfg := Config{
		Allow: mustRules(t, "10.0.0.0/8:80"),
		Self:  addrs("10.0.0.5"),
		Peers: []netip.Prefix{netip.MustParsePrefix("10.7.0.0/24")},
	}
	p := New(cfg)
	cfg.Allow[0].Ports[0] = PortRange{1, 65535}
	cfg.Allow[0].Prefix = netip.MustParsePrefix("0.0.0.0/0")
	cfg.Self[0] = netip.MustParseAddr("10.0.0.6")
	cfg.Peers[0] = netip.MustParsePrefix("10.8.0.0/24")
	runFlows(t, p, []flowCase{
		{"tcp", "10.0.0.1:80", ""},
		{"tcp", "10.0.0.1:81", ReasonNotAllowed},
		{"tcp", "11.0.0.1:80", ReasonNotAllowed},
		{"tcp", "10.0.0.5:80", ReasonSelf},
		{"tcp", "10.0.0.6:80", ""},
		{"tcp", "10.7.0.1:80", ReasonPeer},
	})
}

func TestNewCanonicalises(t *testing.T) {
	p := New(Config{
		Deny:  []Rule{{Prefix: netip.MustParsePrefix("10.1.2.3/16")}}, // unmasked
		Self:  addrs("::ffff:10.0.0.5"),
		Peers: []netip.Prefix{netip.MustParsePrefix("::ffff:10.7.0.0/120")},
	})
	runFlows(t, p, []flowCase{
		{"tcp", "10.1.9.9:80", ReasonDenyRule},
		{"tcp", "10.0.0.5:80", ReasonSelf},
		{"tcp", "10.7.0.9:80", ReasonPeer},
		{"tcp", "10.2.0.1:80", ""},
	})
}

func TestNewPanicsOnMalformedConfig(t *testing.T) {
	cases := map[string]Config{
		"invalid allow prefix": {Allow: []Rule{{}}},
		"invalid deny prefix":  {Deny: []Rule{{}}},
		"reversed ports":       {Deny: []Rule{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Ports: []PortRange{{90, 80}}}}},
		"port 0":               {Allow: []Rule{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Ports: []PortRange{{0, 80}}}}},
		"invalid self":         {Self: []netip.Addr{{}}},
		"invalid peer":         {Peers: []netip.Prefix{{}}},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			New(cfg)
		})
	}
	New(Config{Deny: mustRules(t, "10.0.0.0/8:80-90")}) // control: must not panic
}

func TestDenialError(t *testing.T) {
	p := New(Config{})
	cases := []struct {
		network string
		dst     netip.AddrPort
		want    string
	}{
		{"tcp", netip.MustParseAddrPort("127.0.0.1:80"), "policy: tcp to 127.0.0.1:80 denied (loopback)"},
		{"udp", netip.MustParseAddrPort("[::ffff:127.0.0.1]:53"), "policy: udp to [::ffff:127.0.0.1]:53 denied (loopback)"},
		{"icmp", netip.MustParseAddrPort("169.254.169.254:0"), "policy: icmp to 169.254.169.254 denied (metadata)"},
		{"tcp", netip.AddrPort{}, "policy: tcp to invalid address denied (invalid)"},
	}
	for _, c := range cases {
		err := p.Check(c.network, c.dst)
		if err == nil || err.Error() != c.want {
			t.Errorf("Check(%s, %v) = %v; want %q", c.network, c.dst, err, c.want)
		}
		var d *Denial
		if !errors.As(err, &d) || d.Dst != c.dst || d.Network != c.network {
			t.Errorf("Denial = %+v; want Dst %v Network %s", d, c.dst, c.network)
		}
	}
}

func TestCheckDoesNotAllocateWhenAllowed(t *testing.T) {
	cfg := sidecarConfig()
	cfg.Allow = mustRules(t, "127.0.0.1:9090", "10.0.0.0/8:80,443", "[fd00::/8]:53")
	cfg.Deny = mustRules(t, "10.1.0.0/16")
	p := New(cfg)
	for _, dst := range []string{"10.96.0.10:80", "127.0.0.1:9090", "[fd00::1]:53", "[::ffff:10.96.0.10]:443"} {
		ap := netip.MustParseAddrPort(dst)
		if err := p.Check("tcp", ap); err != nil {
			t.Fatalf("Check(%v) = %v; want allowed", ap, err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = p.Check("tcp", ap) }); n != 0 {
			t.Errorf("Check(%v) allocates %.0f times; want 0", ap, n)
		}
	}
}

func TestCheckConcurrent(t *testing.T) {
	p := New(Config{Allow: mustRules(t, "10.0.0.0/8")})
	allowed, denied := netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("127.0.0.1:80")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if p.Check("tcp", allowed) != nil || p.Check("tcp", denied) == nil {
					errs <- "wrong decision under concurrency"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var msgs []string
	for m := range errs {
		msgs = append(msgs, m)
	}
	if len(msgs) > 0 {
		t.Error(strings.Join(msgs, "; "))
	}
}

func BenchmarkCheckAllowed(b *testing.B) {
	p := New(Config{
		Allow: mustRules(b, "10.96.0.0/12", "10.244.0.0/16:80,443,8000-8999", "[fd00::/8]:53", "127.0.0.1:9090"),
		Deny:  mustRules(b, "10.100.0.0/16", "10.101.0.0/16"),
		Self:  addrs(podIP),
		Peers: []netip.Prefix{netip.MustParsePrefix("10.7.0.0/24")},
	})
	dst := netip.MustParseAddrPort("10.244.3.4:8080")
	b.ReportAllocs()
	for b.Loop() {
		if p.Check("tcp", dst) != nil {
			b.Fatal("denied")
		}
	}
}
