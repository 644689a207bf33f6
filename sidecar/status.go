package sidecar

import (
	"net/http"
	"time"

	"github.com/meshlaunch/meshlaunch/meshapi"
)

func (s *Sidecar) serveStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.Status())
}

// Status reports the sidecar's state (what `meshlaunch status` prints).
func (s *Sidecar) Status() meshapi.Status {
	st := s.stack.Stats()
	ws := s.server.Stats()
	out := meshapi.Status{
		Version:      s.cfg.Version,
		Ready:        s.ready.Load(),
		Draining:     s.draining.Load(),
		PodIP:        s.cfg.PodIP,
		Uptime:       meshapi.Duration(time.Since(s.started).Round(time.Second)),
		Sessions:     ws.Sessions,
		AuthFailures: ws.AuthFailures + s.apiAuthFails.Load() + s.tunnel.Stats().AuthFailures,
		Denied:       st.Denied,
		Flows: meshapi.FlowStatus{
			TCP: st.TCPActive, UDP: st.UDPActive, InFlight: st.InFlight,
			Ingress: s.ingress.active(), TCPTotal: st.TCPAccepted, UDPTotal: st.UDPAccepted,
		},
	}
	peers, err := s.dev.Peers()
	if err != nil {
		s.log.Warn("status: read peers", "err", err)
	}
	live := map[string]bool{}
	for _, p := range s.server.Peers() {
		live[p] = true
	}
	addr := make(map[string]string, len(s.peers))
	for _, p := range s.peers {
		addr[p.PublicKey.String()] = p.Addr.String()
	}
	for _, p := range peers {
		out.Peers = append(out.Peers, meshapi.PeerStatus{
			PublicKey: p.PublicKey, Address: addr[p.PublicKey],
			Connected:     live[p.PublicKey] || (!s.auth.explicit && live[derivedPeer]),
			LastHandshake: p.LastHandshake,
			RxBytes:       p.RxBytes, TxBytes: p.TxBytes,
		})
	}
	return out
}
