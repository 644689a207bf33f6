// Package wgdev runs one wireguard-go device over a given tun.Device and
// conn.Bind, configured from typed values instead of UAPI text.
//
// It is the piece the sidecar and the launcher share: both build a device
// from keys derived by package identity, a Bind from package wsproxy and a
// TUN (netstack on the sidecar, a kernel TUN on the launcher). It knows
// nothing about either role.
package wgdev
