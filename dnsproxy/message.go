package dnsproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"golang.org/x/net/dns/dnsmessage"
)

// maxMsgSize is the largest DNS message: a UDP payload and the TCP length
// prefix both stop at 65535 bytes.
const maxMsgSize = 65535

// query is a client query that passed parseQuery.
type query struct {
	raw []byte // the message as received, forwarded verbatim
	hdr dnsmessage.Header
	q   dnsmessage.Question // the first question
}

// parseQuery checks that b is a DNS query: a header with QR clear followed by
// at least one question. The rest of the message is not inspected.
func parseQuery(b []byte) (query, error) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil {
		return query{}, fmt.Errorf("header: %w", err)
	}
	if h.Response {
		return query{}, errors.New("QR bit set")
	}
	q, err := p.Question()
	if err != nil {
		return query{}, fmt.Errorf("question: %w", err)
	}
	return query{raw: b, hdr: h, q: q}, nil
}

// checkReply reports whether b is a reply to q: a DNS message with QR set,
// q's ID and q's question. Only the header and question are parsed, so a
// truncated (TC) reply passes.
func checkReply(q query, b []byte) error {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil {
		return fmt.Errorf("reply header: %w", err)
	}
	if !h.Response {
		return errors.New("reply has QR bit clear")
	}
	if h.ID != q.hdr.ID {
		return fmt.Errorf("reply ID %d, want %d", h.ID, q.hdr.ID)
	}
	rq, err := p.Question()
	if err != nil {
		return fmt.Errorf("reply question: %w", err)
	}
	if !sameQuestion(rq, q.q) {
		return fmt.Errorf("reply question %v, want %v", rq, q.q)
	}
	return nil
}

// sameQuestion compares questions; names are case-insensitive (RFC 4343).
func sameQuestion(a, b dnsmessage.Question) bool {
	return a.Type == b.Type && a.Class == b.Class &&
		equalFoldASCII(a.Name.String(), b.Name.String())
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// servfail builds the SERVFAIL reply to q, echoing its ID and question.
func servfail(q query) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID:                 q.hdr.ID,
		Response:           true,
		OpCode:             q.hdr.OpCode,
		RecursionDesired:   q.hdr.RecursionDesired,
		RecursionAvailable: true,
		CheckingDisabled:   q.hdr.CheckingDisabled,
		RCode:              dnsmessage.RCodeServerFailure,
	})
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q.q); err != nil {
		return nil, err
	}
	return b.Finish()
}

// readMsg reads one length-prefixed DNS message from a TCP stream.
func readMsg(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// writeMsg writes msg with its length prefix in a single Write.
func writeMsg(w io.Writer, msg []byte) error {
	if len(msg) > maxMsgSize {
		return fmt.Errorf("message of %d bytes is too long for TCP", len(msg))
	}
	b := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(b, uint16(len(msg)))
	copy(b[2:], msg)
	_, err := w.Write(b)
	return err
}
