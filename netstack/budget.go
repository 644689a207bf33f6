package netstack

import (
	"math/bits"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// DefaultBufferBudget is Config.BufferBudget when it is 0. Limits that
// shrink never drop queued data, so endpoints that filled while there
// were fewer of them keep their data until their reader takes it: with
// readers that stall, each direction can hold about 1.5 times the budget
// (a quarter of it for each halving of the share between the auto-tuning
// maximum and the floor) plus the floors of every endpoint. 32 MiB keeps
// one or two flows on gVisor's auto-tuning and gives up to 16 flows at
// least the old 1 MiB default each way. 1,000 downloads towards a job
// that stalls then reads peaked at 205–211 MiB of sidecar RSS, under its
// pod's 256 MiB limit (GOMEMLIMIT 200 MiB), beside the relay's buffers
// and wireguard-go's and the websocket's queues; a 96 MiB budget took
// them to 259 MiB.
const DefaultBufferBudget = 32 << 20

// The smallest limits the budget sets. The receive floor keeps one full
// segment in flight at the default MTU (an MSS is ~64 KB; gVisor
// advertises half of the free receive buffer as its window). The send
// floor is half a segment: with the default budget it is reached at 257
// endpoints, which may then have 8 MiB or more in flight in all, and a
// 64 KiB floor took the 1,000 downloads to 230–249 MiB. Beyond budget/(2*floor)
// endpoints the floors win and the total grows with their number;
// MaxFlows bounds it.
const (
	sndFloor = 32 << 10
	rcvFloor = 128 << 10
)

// bufLimits are the send and receive buffer limits of every endpoint; 0
// leaves that buffer to gVisor's auto-tuning (up to tcpSendBufMax and
// tcpRecvBufMax).
type bufLimits struct{ snd, rcv int }

// bufBudget shares a byte budget among the stack's live TCP endpoints:
// with n of them, each gets a send and a receive limit of budget/(2n),
// at least the floors; a share at or above the auto-tuning maximum leaves
// that buffer to gVisor. gVisor has no global memory pressure (Linux's
// tcp_mem), so without it every endpoint may queue up to its maximum. n
// is rounded up to a power of two and the limits change only when it
// crosses one upwards, or falls to a quarter of it, so opening or
// closing many flows walks the endpoints a few times in all. Its methods
// are safe for concurrent use.
type bufBudget struct {
	total int

	mu    sync.Mutex
	eps   map[tcpip.Endpoint]pinned // live endpoints and which limits they were given
	level int                       // lim is the share of 1<<level endpoints
	lim   bufLimits
	walks int // times lim changed and every endpoint was updated
}

func newBufBudget(total int) *bufBudget {
	b := &bufBudget{total: total, eps: make(map[tcpip.Endpoint]pinned)}
	b.lim = b.limitsFor(0)
	return b
}

// limitsFor is the share of each of 1<<level endpoints.
func (b *bufBudget) limitsFor(level int) bufLimits {
	share := b.total >> min(level+1, 62)
	return bufLimits{snd: clampShare(share, sndFloor, tcpSendBufMax), rcv: clampShare(share, rcvFloor, tcpRecvBufMax)}
}

// clampShare is 0 (auto-tuning) for a share at or above the auto-tuning
// maximum, else the share and at least floor.
func clampShare(share, floor, ceiling int) int {
	if share >= ceiling {
		return 0
	}
	return max(share, floor)
}

// add counts a new (connected) endpoint and gives it the current limits.
func (b *bufBudget) add(ep tcpip.Endpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.eps) + 1; n > 1<<b.level {
		b.setLevel(bits.Len(uint(n - 1)))
	}
	b.eps[ep] = pinned{}
	b.apply(ep)
}

// remove stops counting ep; call it before closing ep.
func (b *bufBudget) remove(ep tcpip.Endpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.eps[ep]; !ok {
		return
	}
	delete(b.eps, ep)
	if n := len(b.eps); b.level >= 2 && n <= 1<<(b.level-2) {
		// Room for twice n before the limits shrink again.
		b.setLevel(bits.Len(uint(max(n, 1)-1)) + 1)
	}
}

// setLevel moves to level and, if that changes the limits, updates every
// endpoint. gVisor never drops queued data when a limit shrinks below
// it: writers wait and the receive window stops growing until it drains.
func (b *bufBudget) setLevel(level int) {
	b.level = level
	lim := b.limitsFor(level)
	if lim == b.lim {
		return
	}
	b.lim = lim
	b.walks++
	for ep := range b.eps {
		b.apply(ep)
	}
}

// pinned says which of an endpoint's buffers have an explicit limit.
type pinned struct{ snd, rcv bool }

// apply gives ep the current limits. Setting a limit turns gVisor's
// auto-tuning of that buffer off for good, so a buffer is left alone
// while its limit is 0 and, once pinned, gets the auto-tuning maximum in
// place of 0.
func (b *bufBudget) apply(ep tcpip.Endpoint) {
	p := b.eps[ep]
	ops := ep.SocketOptions()
	if b.lim.snd != 0 || p.snd {
		p.snd = true
		ops.SetSendBufferSize(int64(orDefault(b.lim.snd, tcpSendBufMax)), true)
	}
	if b.lim.rcv != 0 || p.rcv {
		p.rcv = true
		ops.SetReceiveBufferSize(int64(orDefault(b.lim.rcv, tcpRecvBufMax)), true)
	}
	b.eps[ep] = p
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// state is the number of endpoints, the current limits and the number of
// walks, for tests.
func (b *bufBudget) state() (n int, lim bufLimits, walks int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.eps), b.lim, b.walks
}
