// Package wsproxy carries WireGuard datagrams over websockets: it implements
// wireguard-go's conn.Bind on both ends of the tunnel.
//
// The wire format is one binary websocket message per WireGuard datagram,
// under the subprotocol [Subprotocol], with compression off. Nothing else
// travels on the socket: authentication happens on the HTTP upgrade (a
// bearer credential), before any websocket frame is read.
//
// [Client] is the job side: it dials one server URL (through an HTTP proxy
// when the environment names one), keeps the websocket alive with pings,
// and reconnects with jittered exponential backoff. It calls
// ClientConfig.OnConnect after every (re)connect so the device can start a
// handshake at once instead of waiting for WireGuard's own timers.
//
// [Server] is the sidecar side: an http.Handler that authenticates, then
// turns each websocket session into its own WireGuard endpoint. WireGuard's
// roaming therefore follows a reconnecting peer to its new session. A newer
// session of the same peer closes the older one. Each session has a bounded
// send queue that drops when full and a write deadline per message, so one
// slow reader never stalls the device or the other peers.
//
// Lifecycles: Client and Server own every goroutine they start. The device
// calls Bind.Close and later Bind.Open again; receive functions return
// net.ErrClosed after Close. Server.Shutdown closes every session with
// status 1001 (going away) and waits for their goroutines.
package wsproxy
