package netstack

import (
	"net"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// Keepalive of forwarded TCP flows: a tunnel peer that vanished without a
// FIN is detected within about two minutes instead of gVisor's two hours.
const (
	tcpKeepaliveIdle     = 60 * time.Second
	tcpKeepaliveInterval = 15 * time.Second
	tcpKeepaliveCount    = 4
)

// handleTCP serves one new inbound SYN on the goroutine gVisor started for
// it. It dials first and completes the inner handshake only if the dial
// succeeded; every refusal is a RST except over the in-flight cap, where
// the SYN is dropped for the job to retry. It always completes r and returns when
// the flow has ended. Close waits for it.
//
// The dial cannot be cancelled by the inner client hanging up: before the
// handshake no endpoint exists and neither Linux nor gVisor sends anything
// when a connecting socket is closed. DialTimeout and Close bound it.
func (f *forwarder) handleTCP(r *tcp.ForwarderRequest) {
	if !f.s.enter() {
		r.Complete(true)
		return
	}
	defer f.s.leave()
	fl := flowOf("tcp", r.ID())
	t, reason := f.admit(fl, true)
	if t == nil {
		// Over the in-flight cap the SYN is dropped, not reset: the job's
		// TCP sends it again after 1 s (then 3 s, 7 s, ...), as when a
		// listen queue overflows, so a burst of connects is spread out
		// instead of failing. Every other refusal is a RST.
		r.Complete(reason != reasonLimitInFlight)
		return
	}
	defer t.release()
	outer, ok := f.dial(t, fl)
	if !ok {
		r.Complete(true)
		return
	}
	inner, err := f.s.acceptTCP(r)
	if err != nil {
		outer.Close()
		f.s.log.Debug("netstack: inner tcp handshake failed", "src", fl.Src, "dst", fl.Dst, "err", err)
		return
	}
	f.s.stats.tcpAccepted.Add(1)
	f.s.stats.tcpActive.Add(1)
	defer f.s.stats.tcpActive.Add(-1)
	f.s.splice(inner, outer)
}

// acceptTCP performs the inner handshake and completes r (with a RST if the
// handshake could not start). It blocks until the handshake ends.
func (s *Stack) acceptTCP(r *tcp.ForwarderRequest) (net.Conn, error) {
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		r.Complete(true)
		return nil, convertError(terr)
	}
	r.Complete(false)
	setKeepalive(ep)
	return s.newTCPConn(&wq, ep), nil
}

// setKeepalive enables keepalive probes on a forwarded endpoint.
func setKeepalive(ep tcpip.Endpoint) {
	idle := tcpip.KeepaliveIdleOption(tcpKeepaliveIdle)
	interval := tcpip.KeepaliveIntervalOption(tcpKeepaliveInterval)
	ep.SetSockOpt(&idle)
	ep.SetSockOpt(&interval)
	ep.SetSockOptInt(tcpip.KeepaliveCountOption, tcpKeepaliveCount)
	ep.SocketOptions().SetKeepAlive(true)
}
