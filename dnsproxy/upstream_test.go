package dnsproxy

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const webName = "web.default.svc.cluster.local."

var webAddr = netip.MustParseAddr("10.96.12.34")

// upstreamOpts shapes a fakeUpstream's behaviour.
type upstreamOpts struct {
	delay    time.Duration // before each reply
	truncate bool          // UDP replies carry TC and no answer
	spoof    bool          // UDP: a wrong-ID and a wrong-question reply precede the real one; TCP: only a wrong-ID reply
}

// fakeUpstream is a DNS server on 127.0.0.1, UDP and TCP on one port,
// answering A queries from records.
type fakeUpstream struct {
	opts    upstreamOpts
	records map[string]netip.Addr
	addr    netip.AddrPort

	udpQueries, tcpQueries atomic.Int64
	active, maxActive      atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

// startUpstream starts a fakeUpstream that is stopped at test cleanup.
func startUpstream(t *testing.T, opts upstreamOpts) *fakeUpstream {
	t.Helper()
	pc, ln := listenPair(t)
	u := &fakeUpstream{
		opts:    opts,
		records: map[string]netip.Addr{webName: webAddr},
		addr:    netip.MustParseAddrPort(ln.Addr().String()),
		stop:    make(chan struct{}),
	}
	u.wg.Go(func() { u.serveUDP(pc) })
	u.wg.Go(func() { u.serveTCP(ln) })
	t.Cleanup(func() {
		close(u.stop)
		pc.Close()
		ln.Close()
		u.wg.Wait()
	})
	return u
}

// listenPair opens a TCP listener and a UDP socket on the same loopback port.
func listenPair(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err == nil {
			return pc, ln
		}
		ln.Close()
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return nil, nil
}

func (u *fakeUpstream) serveUDP(pc net.PacketConn) {
	for {
		buf := make([]byte, maxMsgSize)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		u.udpQueries.Add(1)
		u.wg.Go(func() { u.replyUDP(pc, from, buf[:n]) })
	}
}

func (u *fakeUpstream) replyUDP(pc net.PacketConn, to net.Addr, req []byte) {
	if !u.wait() {
		return
	}
	if u.opts.spoof {
		for _, bad := range spoofs(req) {
			pc.WriteTo(bad, to)
		}
	}
	if reply, err := u.answer(req, u.opts.truncate); err == nil {
		pc.WriteTo(reply, to)
	}
}

func (u *fakeUpstream) serveTCP(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u.wg.Go(func() { u.serveTCPConn(c) })
	}
}

func (u *fakeUpstream) serveTCPConn(c net.Conn) {
	defer c.Close()
	u.wg.Go(func() { <-u.stop; c.Close() })
	for {
		req, err := readMsg(c)
		if err != nil {
			return
		}
		u.tcpQueries.Add(1)
		if !u.wait() {
			return
		}
		if u.opts.spoof { // only a wrong-ID reply: the exchange must fail
			writeMsg(c, spoofs(req)[0])
			return
		}
		reply, err := u.answer(req, false)
		if err != nil || writeMsg(c, reply) != nil {
			return
		}
	}
}

// wait sleeps for the configured delay, tracking concurrency; it reports
// false if the upstream is stopping.
func (u *fakeUpstream) wait() bool {
	n := u.active.Add(1)
	defer u.active.Add(-1)
	for m := u.maxActive.Load(); n > m && !u.maxActive.CompareAndSwap(m, n); m = u.maxActive.Load() {
	}
	select {
	case <-time.After(u.opts.delay):
		return true
	case <-u.stop:
		return false
	}
}

// answer builds the reply to req: the A record if known, else NXDOMAIN.
func (u *fakeUpstream) answer(req []byte, truncate bool) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	addr, known := u.records[q.Name.String()]
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, Truncated: truncate}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if known && !truncate && q.Type == dnsmessage.TypeA {
		if err := addA(&b, q.Name, addr); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

func addA(b *dnsmessage.Builder, name dnsmessage.Name, a netip.Addr) error {
	if err := b.StartAnswers(); err != nil {
		return err
	}
	return b.AResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: 30},
		dnsmessage.AResource{A: a.As4()})
}

// spoofs returns replies to req that a forwarder must reject: a wrong ID, and
// the right ID with another question; both claim a different address.
func spoofs(req []byte) [][]byte {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	evil := netip.MustParseAddr("192.0.2.66")
	other := q
	other.Name = dnsmessage.MustNewName("evil.example.")
	return [][]byte{
		buildReply(h.ID+1, q, evil),
		buildReply(h.ID, other, evil),
	}
}

func buildReply(id uint16, q dnsmessage.Question, a netip.Addr) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: true})
	b.StartQuestions()
	b.Question(q)
	addA(&b, q.Name, a)
	msg, _ := b.Finish()
	return msg
}

// silentUpstream is a UDP socket and a TCP listener on one loopback port
// that never answer; it counts the datagrams and connections it receives.
type silentUpstream struct {
	addr      netip.AddrPort
	udp, tcp  atomic.Int64
	mu        sync.Mutex
	heldConns []net.Conn
	wg        sync.WaitGroup
}

func startSilent(t *testing.T) *silentUpstream {
	t.Helper()
	pc, ln := listenPair(t)
	s := &silentUpstream{addr: netip.MustParseAddrPort(ln.Addr().String())}
	s.wg.Go(func() {
		buf := make([]byte, maxMsgSize)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			s.udp.Add(1)
		}
	})
	s.wg.Go(func() { s.hold(ln) })
	t.Cleanup(func() {
		pc.Close()
		ln.Close()
		s.wg.Wait()
		for _, c := range s.heldConns {
			c.Close()
		}
	})
	return s
}

func (s *silentUpstream) hold(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.tcp.Add(1)
		s.mu.Lock()
		s.heldConns = append(s.heldConns, c)
		s.mu.Unlock()
	}
}
