package sidecar

import (
	"net/http"
	"net/netip"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/wgdev"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// PeerHeader is meshapi.PeerHeader: a client names its public key in it
// when the sidecar serves explicit peers.
const PeerHeader = meshapi.PeerHeader

// derivedPeer names the single peer of a secret-derived sidecar.
const derivedPeer = "job"

// setPeers resolves the peer list and the authenticator.
func (s *Sidecar) setPeers() {
	if s.cfg.PrivateKey.IsZero() {
		s.peers = []Peer{{PublicKey: s.id.PeerKey.Public(), Addr: s.cfg.PodIP}}
	} else {
		s.peers = s.cfg.Peers
	}
	s.byAddr = make(map[netip.Addr]Peer, len(s.peers))
	keys := make(map[string]bool, len(s.peers))
	for _, p := range s.peers {
		s.byAddr[p.Addr] = p
		keys[p.PublicKey.String()] = true
	}
	s.auth = &peerAuth{
		bearer:   wsproxy.NewBearerCredentials(map[string]string{s.id.Credential: derivedPeer}),
		explicit: !s.cfg.PrivateKey.IsZero(),
		keys:     keys,
	}
}

func (s *Sidecar) privateKey() identity.PrivateKey {
	if s.cfg.PrivateKey.IsZero() {
		return s.id.SidecarKey
	}
	return s.cfg.PrivateKey
}

func (s *Sidecar) deviceConfig() wgdev.Config {
	cfg := wgdev.Config{PrivateKey: s.privateKey(), Logger: s.log}
	for _, p := range s.peers {
		cfg.Peers = append(cfg.Peers, wgdev.Peer{PublicKey: p.PublicKey, AllowedIPs: []netip.Prefix{netip.PrefixFrom(p.Addr, 32)}})
	}
	return cfg
}

func (s *Sidecar) peerPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(s.peers))
	for _, p := range s.peers {
		out = append(out, netip.PrefixFrom(p.Addr, 32))
	}
	return out
}

// ingressTarget is where exposed ports lead: the peer holding the pod IP,
// else the first peer.
func (s *Sidecar) ingressTarget() netip.Addr {
	if _, ok := s.byAddr[s.cfg.PodIP]; ok {
		return s.cfg.PodIP
	}
	return s.peers[0].Addr
}

// peerAuth checks the bearer credential and names the session's peer.
type peerAuth struct {
	bearer   *wsproxy.BearerCredentials
	explicit bool
	keys     map[string]bool
}

func (a *peerAuth) Authenticate(r *http.Request) (string, bool) {
	peer, ok := a.bearer.Authenticate(r)
	if !ok || !a.explicit {
		return peer, ok
	}
	claimed := r.Header.Get(PeerHeader)
	if !a.keys[claimed] {
		return "", false
	}
	return claimed, true
}
