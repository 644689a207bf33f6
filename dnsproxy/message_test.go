package dnsproxy

import (
	"bytes"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestCheckReply(t *testing.T) {
	q, err := parseQuery(newQuery(t, 10, "Web.Default.svc.cluster.local.", dnsmessage.TypeA))
	if err != nil {
		t.Fatal(err)
	}
	build := func(h dnsmessage.Header, qs ...dnsmessage.Question) []byte {
		b := dnsmessage.NewBuilder(nil, h)
		b.StartQuestions()
		for _, q := range qs {
			b.Question(q)
		}
		msg, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	lower := q.q
	lower.Name = dnsmessage.MustNewName(webName)
	aaaa := q.q
	aaaa.Type = dnsmessage.TypeAAAA
	other := q.q
	other.Name = dnsmessage.MustNewName("web.default.svc.cluster.locals.")
	ok := dnsmessage.Header{ID: 10, Response: true}
	for _, tc := range []struct {
		name  string
		msg   []byte
		valid bool
	}{
		{"match", build(ok, q.q), true},
		{"name case differs", build(ok, lower), true},
		{"truncated flag", build(dnsmessage.Header{ID: 10, Response: true, Truncated: true}, q.q), true},
		{"wrong ID", build(dnsmessage.Header{ID: 11, Response: true}, q.q), false},
		{"not a response", build(dnsmessage.Header{ID: 10}, q.q), false},
		{"no question", build(ok), false},
		{"other type", build(ok, aaaa), false},
		{"other name", build(ok, other), false},
		{"garbage", []byte{0, 10, 0x80}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkReply(q, tc.msg); (err == nil) != tc.valid {
				t.Errorf("checkReply: %v, want valid=%v", err, tc.valid)
			}
		})
	}
}

func TestServfail(t *testing.T) {
	q, err := parseQuery(newQuery(t, 77, webName, dnsmessage.TypeSRV))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := servfail(q)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkReply(q, msg); err != nil {
		t.Fatalf("SERVFAIL does not match its query: %v", err)
	}
	var p dnsmessage.Parser
	h, _ := p.Start(msg)
	if h.RCode != dnsmessage.RCodeServerFailure || !h.RecursionDesired {
		t.Errorf("header %+v, want SERVFAIL with RD copied", h)
	}
}

func TestMsgFraming(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{7}, 300)} {
		if err := writeMsg(&buf, m); err != nil {
			t.Fatal(err)
		}
		got, err := readMsg(&buf)
		if err != nil || !bytes.Equal(got, m) {
			t.Fatalf("readMsg = %q, %v; want %q", got, err, m)
		}
	}
	if err := writeMsg(&buf, make([]byte, maxMsgSize+1)); err == nil {
		t.Error("writeMsg accepted a message longer than 65535 bytes")
	}
}
