package tunnel

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestMaxConnsBoundsDialsInProgress: a dial that hangs holds its slot, so
// with MaxConns 1 a second request is refused at once instead of starting
// another dial; the slot comes back when the first dial gives up.
func TestMaxConnsBoundsDialsInProgress(t *testing.T) {
	started := make(chan struct{}, 4)
	ts := newTestServer(t, func(c *ServerConfig) {
		c.MaxConns = 1
		c.DialTimeout = 500 * time.Millisecond
		c.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			started <- struct{}{}
			<-ctx.Done() // a blackholed destination
			return nil, ctx.Err()
		}
	})
	get := func() int {
		u := *ts.url
		u.Scheme = "http"
		req, _ := http.NewRequest(http.MethodGet, u.String()+PathTCP+"?dst=198.18.0.1:80", nil)
		req.Header.Set("Authorization", "Bearer "+testCred)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Protocol", Subprotocol)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	first := make(chan int, 1)
	go func() { first <- get() }()
	<-started
	if code := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("second request while the first dials: %d, want 503", code)
	}
	if code := <-first; code != http.StatusGatewayTimeout {
		t.Fatalf("the hanging dial ended with %d, want 504", code)
	}
	// Positive control: the slot is free again.
	go func() { first <- get() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("no dial after the slot was released")
	}
	<-first
	if ts.srv.Stats().Rejected != 1 {
		t.Fatalf("rejected = %d, want 1", ts.srv.Stats().Rejected)
	}
}
