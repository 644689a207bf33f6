package dnsproxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

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
