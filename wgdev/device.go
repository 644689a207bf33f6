package wgdev

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlaunch/meshlaunch/identity"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

// Peer is one WireGuard peer of the device.
type Peer struct {
	PublicKey identity.PublicKey
	// AllowedIPs are the inner source addresses accepted from the peer and
	// the destinations routed to it.
	AllowedIPs []netip.Prefix
	// Endpoint is the Bind's string form of where to reach the peer; empty
	// on the server, where sessions provide endpoints.
	Endpoint string
	// PersistentKeepalive, if set, sends a keepalive at this interval.
	PersistentKeepalive time.Duration
}

// Config of a Device.
type Config struct {
	PrivateKey identity.PrivateKey
	Peers      []Peer
	// Logger receives wireguard-go's messages (verbose ones at debug
	// level, errors at warning level, rate-limited); nil discards them.
	Logger *slog.Logger
}

// Device is a running wireguard-go device. Close stops it and closes the
// TUN and the Bind it was given.
type Device struct {
	dev       *device.Device
	closeOnce sync.Once
	spoofed   *atomic.Uint64
}

// New creates the device, configures it and brings it up.
func New(t tun.Device, b conn.Bind, cfg Config) (*Device, error) {
	if cfg.PrivateKey.IsZero() {
		return nil, errors.New("wgdev: no private key")
	}
	uapi, err := uapiConfig(cfg)
	if err != nil {
		return nil, err
	}
	spoofed := new(atomic.Uint64)
	dev := device.NewDevice(t, b, newLogger(cfg.Logger, spoofed))
	if err := dev.IpcSet(uapi); err != nil {
		dev.Close()
		return nil, fmt.Errorf("wgdev: configure: %w", err)
	}
	if err := dev.Up(); err != nil {
		dev.Close()
		return nil, fmt.Errorf("wgdev: up: %w", err)
	}
	return &Device{dev: dev, spoofed: spoofed}, nil
}

func uapiConfig(cfg Config) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "private_key=%s\n", cfg.PrivateKey.Hex())
	for _, p := range cfg.Peers {
		fmt.Fprintf(&b, "public_key=%s\n", p.PublicKey.Hex())
		if p.Endpoint != "" {
			if strings.ContainsAny(p.Endpoint, "\n") {
				return "", fmt.Errorf("wgdev: endpoint %q contains a newline", p.Endpoint)
			}
			fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
		}
		if p.PersistentKeepalive > 0 {
			fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", int(p.PersistentKeepalive/time.Second))
		}
		b.WriteString("replace_allowed_ips=true\n")
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(&b, "allowed_ip=%s\n", a.Masked())
		}
	}
	return b.String(), nil
}

// Handshake starts a new handshake with peer now. Call it when the
// carrier reconnects, so a restarted sidecar learns the session at once
// instead of after WireGuard's timers.
//
// The current keys are expired first: a restarted sidecar no longer has
// them, and wireguard-go would otherwise skip an initiation sent within
// 5 s of the last one and keep sending data nobody can decrypt for ~15 s.
func (d *Device) Handshake(peer identity.PublicKey) error {
	p := d.dev.LookupPeer(device.NoisePublicKey(peer))
	if p == nil {
		return fmt.Errorf("wgdev: handshake: no peer %s", peer)
	}
	p.ExpireCurrentKeypairs()
	if err := p.SendHandshakeInitiation(false); err != nil {
		return fmt.Errorf("wgdev: handshake with %s: %w", peer, err)
	}
	return nil
}

// Close takes the device down and closes its TUN and Bind; idempotent.
func (d *Device) Close() {
	d.closeOnce.Do(d.dev.Close)
}

// Done is closed once the device has stopped.
func (d *Device) Done() <-chan struct{} { return d.dev.Wait() }

// SpoofedPackets counts the packets dropped because their inner source
// address is not in the AllowedIPs of the peer that sent them.
func (d *Device) SpoofedPackets() uint64 { return d.spoofed.Load() }
