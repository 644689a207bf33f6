package wsproxy

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
	"golang.zx2c4.com/wireguard/conn"
)

// TestLatePongOnCongestedCarrierIsNotDeath: on a slow carrier whose queue
// holds messages longer than the pong timeout while data keeps flowing
// both ways (a download and its ACKs), neither end declares the link
// dead: the pong is late behind that data, not lost. The queue delay the
// client saw is the positive control: it exceeds the timeout, so a missed
// pong alone would have ended the link (TestBlackholeDetectedByPings
// checks that a silent link still does).
func TestLatePongOnCongestedCarrierIsNotDeath(t *testing.T) {
	ka := Keepalive{Interval: 200 * time.Millisecond, Timeout: 500 * time.Millisecond, WriteTimeout: 5 * time.Second}
	srv, hs := newTestServer(t, ServerConfig{Keepalive: ka})
	srecv := opened(t, srv)
	defer srv.Close()
	relay, err := faultrelay.New(hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	relay.SetShape(faultrelay.Down, faultrelay.Shape{Rate: 200_000})
	var connects atomic.Int32
	cli := newTestClient(t, hs, func(c *ClientConfig) {
		c.URL.Host = relay.Addr()
		c.Keepalive = ka
		c.OnConnect = func() { connects.Add(1) }
	})
	crecv := opened(t, cli)
	waitConnected(t, cli)
	if err := cli.Send([][]byte{[]byte("hello")}, nil); err != nil {
		t.Fatal(err)
	}
	_, ep := recvOne(t, srecv, 5*time.Second)

	var wg sync.WaitGroup
	var worst atomic.Int64 // longest time a datagram took down, ns
	wg.Go(func() { measureDelays(crecv, &worst) })
	stop := make(chan struct{})
	wg.Go(func() { sendEvery(cli, 20*time.Millisecond, stop) }) // the ACKs
	// Twice the carrier's rate for 3 s: the queue grows to about 3 s.
	msg := make([]byte, 1200)
	tick := time.NewTicker(3 * time.Millisecond)
	var sendErr error
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && sendErr == nil; <-tick.C {
		binary.BigEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
		sendErr = srv.Send([][]byte{msg}, ep)
	}
	tick.Stop()
	close(stop)
	if sendErr != nil {
		cli.Close()
		wg.Wait()
		t.Fatalf("server send: %v: the server ended a session that kept delivering data over a late pong", sendErr)
	}
	eventually(t, 10*time.Second, "a datagram delayed past the pong timeout", func() bool {
		return time.Duration(worst.Load()) > ka.Timeout
	})
	n := connects.Load()
	cli.Close() // ends measureDelays
	wg.Wait()
	t.Logf("longest queue delay %v with a %v pong timeout", time.Duration(worst.Load()).Round(time.Millisecond), ka.Timeout)
	if n != 1 {
		t.Fatalf("the client connected %d times: a late pong on a link that kept delivering data ended it", n)
	}
}

// measureDelays receives timestamped datagrams until recv fails and
// records the longest delay.
func measureDelays(recv conn.ReceiveFunc, worst *atomic.Int64) {
	bufs, sizes, eps := [][]byte{make([]byte, 65535)}, []int{0}, []conn.Endpoint{nil}
	for {
		n, err := recv(bufs, sizes, eps)
		if err != nil {
			return
		}
		if n == 1 && sizes[0] >= 8 {
			d := time.Now().UnixNano() - int64(binary.BigEndian.Uint64(bufs[0]))
			if d > worst.Load() {
				worst.Store(d)
			}
		}
	}
}

// sendEvery sends a small datagram from c every d until stop closes.
func sendEvery(c *Client, d time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			_ = c.Send([][]byte{[]byte("ack")}, nil) // ErrNotConnected while reconnecting
		}
	}
}
