// Package dnsproxy lets the remote job resolve names exactly as its shadow pod
// does. The sidecar serves DNS on an address inside the tunnel and forwards
// every query, unchanged, to the pod's own resolvers (the nameservers of the
// pod's /etc/resolv.conf); the launcher gives the job a resolv.conf with the
// pod's search path, ndots and options that points at that address
// ([ResolvConf.Render]).
//
// # Contract
//
// A [Forwarder] is safe for concurrent use and may serve several sockets at
// once (UDP and TCP, IPv4 and IPv6); the in-flight and connection caps are
// shared by all of them. [Forwarder.ServeUDP] and [Forwarder.ServeTCP] take
// ownership of the socket they are given: they close it when ctx ends, which
// is how a blocked read is woken, and before they return. They return only
// after every goroutine they started has finished. The listening sockets
// usually come from the userspace netstack; upstream sockets are made with
// [Config.Dial] (the pod's own sockets by default).
//
// # Forwarding
//
//   - A query is forwarded only after it parses as a DNS header and question
//     with the QR bit clear; anything else is dropped and counted as
//     malformed.
//   - Each query gets a fresh upstream socket: over UDP a new socket, hence a
//     new random source port, per query; over TCP a new connection per query.
//     Queries received over TCP are forwarded over TCP, so a client that
//     retries a truncated (TC) UDP answer over TCP gets the full answer.
//   - Upstreams are tried in order, each once, each attempt bounded by
//     [Config.Timeout]. An upstream that fails, times out or sends only
//     invalid replies is skipped; a valid reply is relayed verbatim, whatever
//     its RCODE. When every upstream fails the client gets SERVFAIL with its
//     query's ID and question, so it does not wait for its own timeout.
//   - A reply is valid when it parses as a DNS message with QR set and its ID
//     and question (name compared case-insensitively) match the query. Over
//     UDP an invalid reply is ignored and the attempt keeps waiting for a
//     valid one until its deadline, so a spoofed packet cannot displace the
//     real answer.
//   - At most [Config.MaxInFlight] queries are forwarded at once. Over the cap
//     a UDP query is dropped and a TCP connection is closed (after the
//     replies it is owed). At most [Config.MaxTCPConns] client connections are
//     open at once; further ones are closed on accept.
//
// Per-query problems are logged at debug level only; [Forwarder.Stats] counts
// them.
package dnsproxy
