package dnsproxy

import (
	"context"
	"errors"
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

// served is a forwarder serving UDP and TCP on loopback.
type served struct {
	f       *Forwarder
	udpAddr string
	tcpAddr string
	cancel  context.CancelFunc
	udpDone chan error
	tcpDone chan error
}

// serve starts ServeUDP and ServeTCP for cfg; they are stopped, and must
// return nil, at test cleanup.
func serve(t *testing.T, cfg Config) *served {
	t.Helper()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{f: f, udpAddr: pc.LocalAddr().String(), tcpAddr: ln.Addr().String(),
		cancel: cancel, udpDone: make(chan error, 1), tcpDone: make(chan error, 1)}
	go func() { s.udpDone <- f.ServeUDP(ctx, pc) }()
	go func() { s.tcpDone <- f.ServeTCP(ctx, ln) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the serve context and checks both Serve calls return nil
// promptly. It may be called more than once.
func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	for name, ch := range map[string]chan error{"ServeUDP": s.udpDone, "ServeTCP": s.tcpDone} {
		select {
		case err, ok := <-ch:
			if ok && err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if ok {
				close(ch)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s did not return after cancel", name)
		}
	}
}

func newQuery(t testing.TB, id uint16, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	q := dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}
	if err := b.Question(q); err != nil {
		t.Fatal(err)
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// udpAsk sends msg from a new socket and waits up to timeout for a reply.
func udpAsk(addr string, msg []byte, timeout time.Duration) ([]byte, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	buf := make([]byte, maxMsgSize)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// tcpDial connects to addr with a deadline that bounds the whole test use.
func tcpDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// reply is the part of a DNS reply the tests check.
type reply struct {
	hdr      dnsmessage.Header
	question dnsmessage.Question
	answers  []netip.Addr
}

func parseReply(t *testing.T, msg []byte) reply {
	t.Helper()
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	r := reply{hdr: h}
	if r.question, err = p.Question(); err != nil {
		t.Fatalf("reply question: %v", err)
	}
	if err := p.SkipAllQuestions(); err != nil {
		t.Fatal(err)
	}
	for {
		h, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			return r
		}
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		if h.Type != dnsmessage.TypeA {
			t.Fatalf("answer of type %v", h.Type)
		}
		a, err := p.AResource()
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		r.answers = append(r.answers, netip.AddrFrom4(a.A))
	}
}

// wantWeb checks that msg is the answer to a query with id for webName.
func wantWeb(t *testing.T, msg []byte, id uint16) {
	t.Helper()
	r := parseReply(t, msg)
	if r.hdr.ID != id || r.hdr.RCode != dnsmessage.RCodeSuccess || r.hdr.Truncated {
		t.Fatalf("reply header %+v, want ID %d, success, not truncated", r.hdr, id)
	}
	if r.question.Name.String() != webName {
		t.Fatalf("reply question %v, want %s", r.question, webName)
	}
	if len(r.answers) != 1 || r.answers[0] != webAddr {
		t.Fatalf("answers %v, want [%v]", r.answers, webAddr)
	}
}

// eventually polls cond for up to 2s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
