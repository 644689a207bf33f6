package dnsproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/dns/dnsmessage"
)

func TestNewValidatesConfig(t *testing.T) {
	up := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Upstreams: up}, true},
		{"no upstream", Config{}, false},
		{"invalid upstream", Config{Upstreams: []netip.AddrPort{{}}}, false},
		{"port zero", Config{Upstreams: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}, false},
		{"negative timeout", Config{Upstreams: up, Timeout: -1}, false},
		{"negative in-flight", Config{Upstreams: up, MaxInFlight: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New: %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && (f.cfg.Timeout != defaultTimeout || cap(f.slots) != defaultMaxInFlight ||
				cap(f.conns) != defaultMaxTCPConns || f.cfg.TCPIdle != defaultTCPIdle || f.cfg.Dial == nil) {
				t.Errorf("defaults not applied: %+v", f.cfg)
			}
		})
	}
}

func TestForwardUDP(t *testing.T) {
	up := startUpstream(t, upstreamOpts{})
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}})

	msg, err := udpAsk(s.udpAddr, newQuery(t, 7, webName, dnsmessage.TypeA), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantWeb(t, msg, 7)

	// An upstream's NXDOMAIN is an answer, relayed as is.
	msg, err = udpAsk(s.udpAddr, newQuery(t, 8, "nope.default.svc.cluster.local.", dnsmessage.TypeA), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := parseReply(t, msg); r.hdr.ID != 8 || r.hdr.RCode != dnsmessage.RCodeNameError {
		t.Fatalf("reply %+v, want ID 8 NXDOMAIN", r.hdr)
	}
	if got := s.f.Stats(); got.Queries != 2 || got.Answered != 2 || got.Failed+got.Dropped+got.Malformed != 0 {
		t.Errorf("stats %+v, want 2 queries answered", got)
	}
	if up.udpQueries.Load() != 2 || up.tcpQueries.Load() != 0 {
		t.Errorf("upstream saw %d UDP and %d TCP queries, want 2 UDP", up.udpQueries.Load(), up.tcpQueries.Load())
	}
}

func TestFailoverOnTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			dead := startSilent(t)
			up := startUpstream(t, upstreamOpts{})
			s := serve(t, Config{Upstreams: []netip.AddrPort{dead.addr, up.addr}, Timeout: timeout})

			start := time.Now()
			wantWeb(t, ask(t, s, network, newQuery(t, 42, webName, dnsmessage.TypeA)), 42)
			if el := time.Since(start); el < timeout {
				t.Errorf("answered after %v, before the first upstream's timeout %v", el, timeout)
			}
			if got := dead.udp.Load() + dead.tcp.Load(); got != 1 {
				t.Errorf("first upstream got %d queries, want 1", got)
			}
			if got := s.f.Stats(); got.Answered != 1 || got.Failed != 0 {
				t.Errorf("stats %+v, want 1 answered", got)
			}
		})
	}
}

func TestServfailWhenAllUpstreamsFail(t *testing.T) {
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			a, b := startSilent(t), startSilent(t)
			s := serve(t, Config{Upstreams: []netip.AddrPort{a.addr, b.addr}, Timeout: 100 * time.Millisecond})

			r := parseReply(t, ask(t, s, network, newQuery(t, 99, webName, dnsmessage.TypeAAAA)))
			if r.hdr.ID != 99 || !r.hdr.Response || r.hdr.RCode != dnsmessage.RCodeServerFailure {
				t.Fatalf("reply %+v, want ID 99 SERVFAIL", r.hdr)
			}
			if r.question.Name.String() != webName || r.question.Type != dnsmessage.TypeAAAA {
				t.Errorf("reply question %v, want %s AAAA", r.question, webName)
			}
			if got := a.udp.Load() + a.tcp.Load() + b.udp.Load() + b.tcp.Load(); got != 2 {
				t.Errorf("upstreams got %d queries, want one each", got)
			}
			if got := s.f.Stats(); got.Failed != 1 || got.Answered != 0 {
				t.Errorf("stats %+v, want 1 failed", got)
			}
		})
	}
}

// Spoofed UDP replies (wrong ID, wrong question) are ignored and the real
// answer, which arrives after them, is relayed. Over TCP a wrong reply fails
// the attempt and the next upstream answers.
func TestSpoofedRepliesRejected(t *testing.T) {
	t.Run("udp", func(t *testing.T) {
		up := startUpstream(t, upstreamOpts{spoof: true})
		s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}})
		wantWeb(t, ask(t, s, "udp", newQuery(t, 5, webName, dnsmessage.TypeA)), 5)
	})
	t.Run("tcp", func(t *testing.T) {
		bad := startUpstream(t, upstreamOpts{spoof: true})
		good := startUpstream(t, upstreamOpts{})
		s := serve(t, Config{Upstreams: []netip.AddrPort{bad.addr, good.addr}})
		wantWeb(t, ask(t, s, "tcp", newQuery(t, 5, webName, dnsmessage.TypeA)), 5)
		if bad.tcpQueries.Load() != 1 || good.tcpQueries.Load() != 1 {
			t.Errorf("upstreams got %d and %d queries, want 1 each", bad.tcpQueries.Load(), good.tcpQueries.Load())
		}
	})
}

func TestMalformedQueriesDropped(t *testing.T) {
	valid := newQuery(t, 1, webName, dnsmessage.TypeA)
	response := append([]byte(nil), valid...)
	response[2] |= 0x80 // QR
	noQuestion := append([]byte(nil), valid[:12]...)
	noQuestion[5] = 0 // QDCOUNT
	malformed := map[string][]byte{
		"garbage":        []byte("hello, world"),
		"short header":   valid[:5],
		"response":       response,
		"no question":    noQuestion,
		"cut question":   valid[:20],
		"empty datagram": {},
	}

	t.Run("udp", func(t *testing.T) {
		up := startUpstream(t, upstreamOpts{})
		s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}})
		for name, msg := range malformed {
			if _, err := udpAsk(s.udpAddr, msg, 100*time.Millisecond); !isTimeout(err) {
				t.Errorf("%s: got a reply or error %v, want silence", name, err)
			}
		}
		wantWeb(t, ask(t, s, "udp", valid), 1) // positive control
		if got := s.f.Stats(); got.Malformed != uint64(len(malformed)) || got.Answered != 1 {
			t.Errorf("stats %+v, want %d malformed and 1 answered", got, len(malformed))
		}
		if got := up.udpQueries.Load(); got != 1 {
			t.Errorf("upstream got %d queries, want only the valid one", got)
		}
	})
	t.Run("tcp", func(t *testing.T) {
		up := startUpstream(t, upstreamOpts{})
		s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}})
		c := tcpDial(t, s.tcpAddr)
		if err := writeMsg(c, response); err != nil {
			t.Fatal(err)
		}
		if _, err := readMsg(c); !errors.Is(err, io.EOF) {
			t.Errorf("after a malformed query: %v, want the connection closed", err)
		}
		wantWeb(t, ask(t, s, "tcp", valid), 1) // positive control
		if got := s.f.Stats(); got.Malformed != 1 || got.Answered != 1 {
			t.Errorf("stats %+v, want 1 malformed and 1 answered", got)
		}
		if got := up.tcpQueries.Load(); got != 1 {
			t.Errorf("upstream got %d queries, want only the valid one", got)
		}
	})
}

// A truncated UDP answer is relayed; the client's retry over TCP is
// forwarded over TCP and gets the full answer.
func TestTruncatedPassthrough(t *testing.T) {
	up := startUpstream(t, upstreamOpts{truncate: true})
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}})

	r := parseReply(t, ask(t, s, "udp", newQuery(t, 3, webName, dnsmessage.TypeA)))
	if r.hdr.ID != 3 || !r.hdr.Truncated || len(r.answers) != 0 {
		t.Fatalf("UDP reply %+v with %v, want ID 3, TC and no answer", r.hdr, r.answers)
	}
	wantWeb(t, ask(t, s, "tcp", newQuery(t, 3, webName, dnsmessage.TypeA)), 3)
}

// Cancelling ctx makes ServeUDP and ServeTCP return promptly, with queries in
// flight and a connection open, after the goroutines they started have
// finished, closing their sockets and leaving no goroutine behind.
func TestServeReturnsOnCancel(t *testing.T) {
	before := goleak.IgnoreCurrent()
	dialing := map[string]*atomic.Int64{"udp": new(atomic.Int64), "tcp": new(atomic.Int64)}
	slowDial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		dialing[network].Add(1)
		defer dialing[network].Add(-1)
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // unwinds slowly: Serve must wait for it
		return nil, ctx.Err()
	}
	s := serve(t, Config{Upstreams: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")},
		Timeout: time.Minute, Dial: slowDial})

	uc, err := net.Dial("udp", s.udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	uc.Write(newQuery(t, 1, webName, dnsmessage.TypeA))
	busy := tcpDial(t, s.tcpAddr)
	writeMsg(busy, newQuery(t, 2, webName, dnsmessage.TypeA))
	idle := tcpDial(t, s.tcpAddr)
	eventually(t, "a query in flight on each transport", func() bool {
		return dialing["udp"].Load() == 1 && dialing["tcp"].Load() == 1
	})

	s.cancel()
	waitServe(t, s.udpDone, "udp", dialing["udp"])
	waitServe(t, s.tcpDone, "tcp", dialing["tcp"])
	if n := s.f.Stats().InFlight; n != 0 {
		t.Errorf("InFlight %d after return", n)
	}
	for _, c := range []net.Conn{busy, idle} {
		// ECONNRESET: idle may still have been in the accept queue.
		if _, err := readMsg(c); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("client connection: %v, want closed", err)
		}
	}
	assertClosed(t, s)
	goleak.VerifyNone(t, before)
}

// waitServe waits for a Serve call to return nil within a second and checks
// that none of its upstream dials is still running.
func waitServe(t *testing.T, done chan error, network string, dialing *atomic.Int64) {
	t.Helper()
	select {
	case err := <-done:
		close(done) // served.stop at cleanup sees it returned
		if err != nil {
			t.Errorf("serve %s: %v", network, err)
		}
		if n := dialing.Load(); n != 0 {
			t.Errorf("serve %s returned with %d upstream dials still running", network, n)
		}
	case <-time.After(time.Second):
		t.Fatalf("serve %s did not return within 1s of cancel", network)
	}
}

// assertClosed checks that the served sockets were closed by binding their
// addresses again.
func assertClosed(t *testing.T, s *served) {
	t.Helper()
	pc, err := net.ListenPacket("udp", s.udpAddr)
	if err != nil {
		t.Errorf("UDP socket still open: %v", err)
	} else {
		pc.Close()
	}
	ln, err := net.Listen("tcp", s.tcpAddr)
	if err != nil {
		t.Errorf("TCP listener still open: %v", err)
	} else {
		ln.Close()
	}
}

// ask sends msg over network ("udp" or "tcp", a new connection) and returns
// the reply.
func ask(t *testing.T, s *served, network string, msg []byte) []byte {
	t.Helper()
	if network == "udp" {
		reply, err := udpAsk(s.udpAddr, msg, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	c := tcpDial(t, s.tcpAddr)
	defer c.Close()
	if err := writeMsg(c, msg); err != nil {
		t.Fatal(err)
	}
	reply, err := readMsg(c)
	if err != nil {
		t.Fatal(err)
	}
	return reply
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
