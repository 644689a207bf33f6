package nsload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// firstQueryPort is the source port of a storm's first query; query i
// leaves from firstQueryPort+i, so that every query is a new 4-tuple at
// the sidecar (ephemeral ports could repeat). The range lies below
// Linux's ephemeral ports, so nothing else holds them.
const firstQueryPort = 20000

// dnsStorm sends n queries for name's A record to server, conc at a
// time, each from its own new UDP socket and source port, and checks that
// the answer is want. An unanswered query is sent again, from an
// ephemeral port, up to tries times, each waiting tryTimeout.
func dnsStorm(server, name, want string, n, conc, tries int, tryTimeout time.Duration) report {
	srv, err := netip.ParseAddrPort(server)
	if err != nil {
		return report{Err: err.Error()}
	}
	wantAddr, err := netip.ParseAddr(want)
	if err != nil {
		return report{Err: err.Error()}
	}
	q, err := newQuestion(name)
	if err != nil {
		return report{Err: err.Error()}
	}
	if n > 65535-firstQueryPort {
		return report{Err: fmt.Sprintf("%d queries: at most %d source ports", n, 65535-firstQueryPort)}
	}
	start := time.Now()
	t := newTally("dns")
	forEach(n, conc, func(i int) {
		begin := time.Now()
		var err error
		for try := range max(tries, 1) {
			port := 0
			if try == 0 {
				port = firstQueryPort + i
			} else {
				t.retried()
			}
			if err = query(srv, port, q, wantAddr, tryTimeout); err == nil {
				break
			}
		}
		t.add(err, time.Since(begin), 0)
	})
	return t.done(start)
}

func newQuestion(name string) (dnsmessage.Question, error) {
	n, err := dnsmessage.NewName(name)
	if err != nil {
		return dnsmessage.Question{}, fmt.Errorf("name %q: %w", name, err)
	}
	return dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}, nil
}

// query asks srv for q from a new socket on port (0: ephemeral) and
// checks that the answer holds want.
func query(srv netip.AddrPort, port int, q dnsmessage.Question, want netip.Addr, timeout time.Duration) error {
	ctx, cancel := withTimeout(timeout)
	defer cancel()
	c, err := net.DialUDP("udp4", &net.UDPAddr{Port: port}, net.UDPAddrFromAddrPort(srv))
	if err != nil {
		return fmt.Errorf("socket on port %d: %w", port, err)
	}
	defer c.Close()
	defer bindConn(ctx, c)()
	id := uint16(rand.Uint32())
	msg := dnsmessage.Message{Header: dnsmessage.Header{ID: id, RecursionDesired: true}, Questions: []dnsmessage.Question{q}}
	b, err := msg.Pack()
	if err != nil {
		return fmt.Errorf("pack query: %w", err)
	}
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("send query: %w", err)
	}
	buf := make([]byte, 1500)
	for {
		m, err := c.Read(buf)
		if err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		if err := checkAnswer(buf[:m], id, q, want); !errors.Is(err, errNotOurs) {
			return err
		}
	}
}

var errNotOurs = errors.New("not an answer to this query")

// checkAnswer checks that b answers query id for q with want.
func checkAnswer(b []byte, id uint16, q dnsmessage.Question, want netip.Addr) error {
	var m dnsmessage.Message
	if err := m.Unpack(b); err != nil || m.ID != id || !m.Response || len(m.Questions) != 1 || m.Questions[0] != q {
		return errNotOurs
	}
	if m.RCode != dnsmessage.RCodeSuccess {
		return fmt.Errorf("%s: %v", q.Name, m.RCode)
	}
	for _, a := range m.Answers {
		if r, ok := a.Body.(*dnsmessage.AResource); ok && netip.AddrFrom4(r.A) == want {
			return nil
		}
	}
	return fmt.Errorf("%s: answers %v, want %v", q.Name, m.Answers, want)
}
