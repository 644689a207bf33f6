package dnsproxy

import (
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// 2,000 queries, each from a new client socket, against a slow upstream with
// a small MaxInFlight: every query is either answered or dropped, the
// upstream never sees more than MaxInFlight at once, and every socket is
// closed afterwards.
func TestManyClientsBounded(t *testing.T) {
	const (
		queries     = 2000
		clients     = 100
		maxInFlight = 16
	)
	up := startUpstream(t, upstreamOpts{delay: 20 * time.Millisecond})
	baseline := countFDs(t)
	s := serve(t, Config{Upstreams: []netip.AddrPort{up.addr}, MaxInFlight: maxInFlight})

	msgs := make([][]byte, queries)
	for i := range msgs {
		msgs[i] = newQuery(t, uint16(i), webName, dnsmessage.TypeA)
	}
	var next, replies atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < queries; i = next.Add(1) - 1 {
				if _, err := udpAsk(s.udpAddr, msgs[i], 150*time.Millisecond); err == nil {
					replies.Add(1)
				}
			}
		})
	}
	wg.Wait()
	s.stop(t)

	st := s.f.Stats()
	t.Logf("stats %+v, %d replies received, upstream peak concurrency %d", st, replies.Load(), up.maxActive.Load())
	if st.Queries != queries || st.Answered+st.Dropped != queries || st.Failed+st.Malformed != 0 {
		t.Errorf("stats %+v: want all %d queries answered or dropped", st, queries)
	}
	if st.Dropped == 0 || replies.Load() == 0 {
		t.Errorf("stats %+v, %d replies: want both answers and drops", st, replies.Load())
	}
	if peak := up.maxActive.Load(); peak > maxInFlight {
		t.Errorf("upstream saw %d concurrent queries, MaxInFlight is %d", peak, maxInFlight)
	}
	if st.InFlight != 0 {
		t.Errorf("InFlight %d after return", st.InFlight)
	}
	eventually(t, "file descriptors back to baseline", func() bool { return countFDs(t) <= baseline })
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(ents)
}
