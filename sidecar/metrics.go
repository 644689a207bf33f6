package sidecar

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsHandler exposes Prometheus metrics. Values are read from the
// components' counters at scrape time, so the packet path pays nothing.
func (s *Sidecar) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{s: s},
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

var (
	descReady      = prometheus.NewDesc("meshlaunch_sidecar_ready", "1 when the sidecar accepts sessions.", nil, nil)
	descPeers      = prometheus.NewDesc("meshlaunch_peers_connected", "Peers with a live websocket session.", nil, nil)
	descHandshake  = prometheus.NewDesc("meshlaunch_peer_handshake_age_seconds", "Seconds since the last WireGuard handshake with the peer (absent before the first).", []string{"peer"}, nil)
	descPeerBytes  = prometheus.NewDesc("meshlaunch_peer_bytes_total", "WireGuard bytes per peer and direction.", []string{"peer", "direction"}, nil)
	descWSBytes    = prometheus.NewDesc("meshlaunch_websocket_bytes_total", "Websocket payload bytes by direction.", []string{"direction"}, nil)
	descSessions   = prometheus.NewDesc("meshlaunch_websocket_sessions_total", "Websocket sessions accepted; more than the number of peers means reconnects.", nil, nil)
	descReplaced   = prometheus.NewDesc("meshlaunch_websocket_sessions_replaced_total", "Sessions closed because the same peer connected again.", nil, nil)
	descAuthFail   = prometheus.NewDesc("meshlaunch_auth_failures_total", "Requests refused for a missing or wrong credential, by endpoint.", []string{"endpoint"}, nil)
	descQueueDrops = prometheus.NewDesc("meshlaunch_websocket_queue_drops_total", "Datagrams dropped because a session's send queue was full.", nil, nil)
	descFlows      = prometheus.NewDesc("meshlaunch_flows", "Forwarded flows by protocol and state.", []string{"proto", "state"}, nil)
	descFlowsTotal = prometheus.NewDesc("meshlaunch_flows_total", "Egress flows accepted by protocol.", []string{"proto"}, nil)
	descDenied     = prometheus.NewDesc("meshlaunch_flows_denied_total", "Egress flows refused, by reason.", []string{"reason"}, nil)
	descFlowBytes  = prometheus.NewDesc("meshlaunch_flow_bytes_total", "Payload bytes of forwarded egress flows by direction.", []string{"direction"}, nil)
	descIngress    = prometheus.NewDesc("meshlaunch_ingress_total", "Ingress connections and UDP sessions by outcome.", []string{"outcome"}, nil)
	descDNS        = prometheus.NewDesc("meshlaunch_dns_queries_total", "In-tunnel DNS queries by outcome.", []string{"outcome"}, nil)
	descTunActive  = prometheus.NewDesc("meshlaunch_tunnel_websockets", "Live tunnel-mode websockets.", nil, nil)
	descTunTotal   = prometheus.NewDesc("meshlaunch_tunnel_total", "Tunnel-mode requests by outcome.", []string{"outcome"}, nil)
	descTunBytes   = prometheus.NewDesc("meshlaunch_tunnel_bytes_total", "Tunnel-mode stream bytes by direction (closed streams).", []string{"direction"}, nil)
)

type collector struct{ s *Sidecar }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReady, descPeers, descHandshake, descPeerBytes, descWSBytes, descSessions,
		descReplaced, descAuthFail, descQueueDrops, descFlows, descFlowsTotal, descDenied, descFlowBytes, descIngress, descDNS,
		descTunActive, descTunTotal, descTunBytes} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge(descReady, b2f(s.ready.Load()))
	ws := s.server.Stats()
	gauge(descPeers, float64(len(s.server.Peers())))
	counter(descWSBytes, ws.BytesIn, "in")
	counter(descWSBytes, ws.BytesOut, "out")
	counter(descSessions, ws.Accepted)
	counter(descReplaced, ws.Replaced)
	counter(descAuthFail, ws.AuthFailures, "mesh")
	counter(descAuthFail, s.apiAuthFails.Load(), "api")
	counter(descAuthFail, s.tunnel.Stats().AuthFailures, "tunnel")
	counter(descQueueDrops, ws.QueueDrops)
	if peers, err := s.dev.Peers(); err == nil {
		for _, p := range peers {
			if !p.LastHandshake.IsZero() {
				gauge(descHandshake, time.Since(p.LastHandshake).Seconds(), p.PublicKey)
			}
			counter(descPeerBytes, p.RxBytes, p.PublicKey, "rx")
			counter(descPeerBytes, p.TxBytes, p.PublicKey, "tx")
		}
	}
	st := s.stack.Stats()
	gauge(descFlows, float64(st.TCPActive), "tcp", "established")
	gauge(descFlows, float64(st.InFlight), "tcp", "dialing")
	gauge(descFlows, float64(st.UDPActive), "udp", "active")
	gauge(descFlows, float64(s.ingress.active()), "ingress", "active")
	counter(descFlowsTotal, st.TCPAccepted, "tcp")
	counter(descFlowsTotal, st.UDPAccepted, "udp")
	counter(descFlowsTotal, st.ICMPEchoForwarded, "icmp")
	// WireGuard drops a spoofed source before the forwarder sees it.
	st.Denied[reasonSpoofed] += s.dev.SpoofedPackets()
	for reason, n := range st.Denied {
		counter(descDenied, n, reason)
	}
	counter(descFlowBytes, st.BytesIn, "in")
	counter(descFlowBytes, st.BytesOut, "out")
	counter(descIngress, s.ingress.accepted.Load(), "accepted")
	counter(descIngress, s.ingress.refused.Load(), "refused_limit")
	d := s.dns.Stats()
	counter(descDNS, d.Answered, "answered")
	counter(descDNS, d.Failed, "failed")
	counter(descDNS, d.Dropped, "dropped")
	counter(descDNS, d.Malformed, "malformed")
	ts := s.tunnel.Stats()
	gauge(descTunActive, float64(ts.Active))
	counter(descTunTotal, ts.Streams, "tcp_stream")
	counter(descTunTotal, ts.UDPSessions, "udp_session")
	counter(descTunTotal, ts.Reverse, "reverse")
	counter(descTunTotal, ts.Denied, "denied")
	counter(descTunTotal, ts.DialFailures, "dial_failed")
	counter(descTunTotal, ts.AuthFailures, "auth_failed")
	counter(descTunTotal, ts.Rejected, "over_limit")
	counter(descTunBytes, ts.BytesUp, "up")
	counter(descTunBytes, ts.BytesDown, "down")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
