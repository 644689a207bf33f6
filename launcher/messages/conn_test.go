package messages

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	parent, childEnd, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	child, err := FileConn(childEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Close(); child.Close() })
	return parent, child
}

func TestRoundTripWithFile(t *testing.T) {
	parent, child := pair(t)
	cfg := &Config{TunName: "ml0", Addr: netip.MustParseAddr("10.244.1.5"), MTU: 1400,
		Routes: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, Argv: []string{"true"}}
	if err := parent.Send(t.Context(), Message{Type: TypeConfig, Config: cfg}, nil); err != nil {
		t.Fatal(err)
	}
	m, f, err := child.Recv(t.Context())
	if err != nil || f != nil || m.Type != TypeConfig || m.Config.Addr != cfg.Addr || m.Config.Routes[0] != cfg.Routes[0] {
		t.Fatalf("Recv = %+v, %v, %v", m, f, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := child.Send(t.Context(), Message{Type: TypeReady, Ready: &Ready{TunName: "ml0"}}, w); err != nil {
		t.Fatal(err)
	}
	m, got, err := parent.Recv(t.Context())
	if err != nil || got == nil || m.Type != TypeReady {
		t.Fatalf("Recv = %+v, %v, %v", m, got, err)
	}
	defer got.Close()
	if _, err := got.Write([]byte("x")); err != nil {
		t.Fatalf("write to passed file: %v", err)
	}
	b := make([]byte, 1)
	if _, err := r.Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("read through passed file: %q, %v", b, err)
	}
}

func TestRecvHonoursContext(t *testing.T) {
	parent, _ := pair(t)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err := parent.Recv(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv after deadline: %v, want DeadlineExceeded", err)
	}
}

func TestRecvPeerGone(t *testing.T) {
	parent, child := pair(t)
	child.Close()
	if _, _, err := parent.Recv(t.Context()); !IsPeerGone(err) {
		t.Fatalf("Recv after peer close: %v, want peer gone", err)
	}
}
