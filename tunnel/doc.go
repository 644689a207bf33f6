// Package tunnel is meshlaunch's tunnel mode (`meshlaunch tunnel`): TCP and
// UDP port forwards and a SOCKS5 proxy through the sidecar's websocket
// endpoint, without namespaces, WireGuard or a second TCP stack.
//
// # When to use it
//
// Prefer `meshlaunch tunnel` over `meshlaunch run` when the job needs a few
// known services of the cluster (a database, an API, a license server) or
// must expose one port on the pod, when the node has no user namespaces, or
// when throughput matters: each connection is a plain byte stream over its
// own websocket, at close to the speed of the carrier. Use `meshlaunch run`
// when the job needs the pod's network as its own (arbitrary destinations,
// MPI, cluster DNS for every program, inbound connections on many ports).
//
// # Usage
//
//	meshlaunch tunnel --server URL --token-file FILE \
//	    [-L [BIND:]PORT:HOST:PORT[/udp]...] [-R PORT:HOST:PORT[/udp]...] \
//	    [--socks [BIND:]PORT] [--proxy-protocol] [--stdio HOST:PORT]
//
// Local forwards (-L [BIND:]PORT:HOST:PORT[/udp]) listen on BIND:PORT of
// this node (default 127.0.0.1) and forward each connection, or each local
// UDP client, to HOST:PORT as seen from the pod. HOST is resolved by the
// sidecar with the pod's resolver, so cluster names work
// ("web.default.svc"); IPv6 addresses go in brackets.
//
// Reverse forwards (-R PORT:HOST:PORT[/udp]) listen on the pod's PORT,
// which must be in the sidecar's --expose list, and forward each
// connection to HOST:PORT as seen from this node. With --proxy-protocol
// the local service first receives a PROXY protocol v1 line with the pod
// client's address.
//
// The SOCKS5 proxy (--socks [BIND:]PORT, no authentication, default
// 127.0.0.1) supports CONNECT and UDP ASSOCIATE; domain names are resolved
// by the sidecar (curl --socks5-hostname, socks5h://). --stdio HOST:PORT
// connects stdin and stdout to HOST:PORT, for ssh's ProxyCommand.
//
// Every destination is checked by the sidecar's egress policy at dial time,
// on the resolved address: a name that resolves to loopback is refused like
// the address itself.
//
// # Protocol
//
// All requests are HTTP/1.1 GETs under the server URL's path prefix, with
// "Authorization: Bearer <credential>" (401 otherwise), and all but
// [PathHello] are websocket upgrades with subprotocol [Subprotocol] and
// compression off. The server matches the paths as suffixes.
//
//   - GET [PathHello]: 204 if the credential is accepted (the client's
//     preflight).
//   - GET [PathTCP]?dst=HOST:PORT: the server resolves HOST, dials each
//     address through its policy-checking dialer and upgrades only once a
//     dial succeeded. Refusals come before the upgrade with a one-line text
//     body: 400 bad dst, 403 denied by the policy (the body names the
//     reason), 502 refused/unreachable/unresolvable, 504 timeout, 503 too
//     many connections or shutting down. Then binary messages carry the
//     stream; an empty binary message is EOF in that direction
//     (half-close). Once both directions have sent EOF each end closes with
//     1000. Any other end is an abort: close code [StatusReset] (4000), or
//     1001 on shutdown, and the local TCP connection is reset.
//   - GET [PathUDP]?dst=HOST:PORT: as above with a connected UDP socket;
//     one binary message per datagram, one websocket per UDP session (per
//     local client address for -L, per destination for SOCKS). A session
//     without datagrams for the idle timeout (default 60 s) is closed with
//     [StatusIdle] (4002).
//   - GET [PathReverse]?port=P&proto=tcp|udp: registers a -R port. The
//     server refuses with 403, naming the allowed ports, unless (P, proto)
//     is in its allowed list; otherwise it listens on the pod's P first
//     (failure: 502) and upgrades. A second registration of the same port
//     replaces the first, which is closed with [StatusReplaced] (4001).
//     For TCP, each connection on the pod is announced as a JSON text
//     message {"id": "…", "client": "ip:port", "server": "ip:port"} and
//     waits up to 10 s to be claimed. For UDP, datagrams travel on the
//     control websocket itself as binary messages prefixed with an 18-byte
//     header: the pod client's address (16 bytes, IPv4 mapped into IPv6)
//     and port (big-endian). Replies carry the same header and are sent
//     only to pod clients that sent a datagram within the idle timeout.
//   - GET [PathAccept]?id=ID: claims an announced connection; the websocket
//     then carries the stream as for [PathTCP]. The client dials its local
//     service first; if that fails it sends GET [PathAccept]?id=ID&error=…
//     (204), and the pod connection is reset at once.
//
// Both ends ping every websocket (default every 20 s, below nginx's 60 s
// idle timeout) and drop one whose pong does not come within the timeout
// (default 15 s). On stream websockets a missed pong is forgiven while a
// write of that end is blocked by backpressure, since the peer (or the
// local application) is then not reading; TCP's own timeouts apply. The
// client reconnects -R control websockets with jittered exponential
// backoff and registers its ports again; established streams are not
// affected by a reconnect.
//
// # Lifecycles
//
// [Server] owns every websocket it accepted and every reverse listener;
// [Server.Shutdown] closes them (1001) and waits. [Client.Run] and
// [Client.Stdio] own every listener, websocket and goroutine they start
// and return after closing them.
package tunnel
