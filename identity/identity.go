// Package identity derives everything two meshlaunch peers need from one
// shared secret: the sidecar's and the job's WireGuard key pairs and the
// websocket credential. Both sides compute the same values independently, so
// nothing has to be exchanged and nothing drifts when a pod is recreated.
//
// Derivation is HKDF-SHA256 (RFC 5869) with the secret as input keying
// material, a fixed salt and one distinct info label per output. Outputs
// under different labels are independent pseudorandom values, so learning one
// (for example the websocket credential, which an Ingress may log) reveals
// nothing about the WireGuard private keys. See docs/design.md, "Identity".
package identity

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MinSecretLen is the shortest secret accepted, in bytes.
const MinSecretLen = 16

// Labels of the derived values. They are part of the wire contract: changing
// one breaks interoperability with every deployed peer.
const (
	salt            = "meshlaunch identity v1"
	labelSidecarKey = "meshlaunch v1 sidecar wireguard private key"
	labelPeerKey    = "meshlaunch v1 peer wireguard private key"
	labelCredential = "meshlaunch v1 websocket credential"
)

// ErrShortSecret reports a secret below MinSecretLen bytes.
var ErrShortSecret = errors.New("identity: secret too short")

// Identity is what both ends of one shadow pod derive from its secret.
type Identity struct {
	// SidecarKey is the WireGuard private key of the sidecar.
	SidecarKey PrivateKey
	// PeerKey is the WireGuard private key of the remote job's peer.
	PeerKey PrivateKey
	// Credential is the bearer token presented on the websocket upgrade.
	Credential string
}

// Derive computes the identity for secret. Surrounding white space (a
// trailing newline in a token file) is not part of the secret.
func Derive(secret string) (Identity, error) {
	s := strings.TrimSpace(secret)
	if len(s) < MinSecretLen {
		return Identity{}, fmt.Errorf("%w: %d bytes, need at least %d (make one with `meshlaunch token`)",
			ErrShortSecret, len(s), MinSecretLen)
	}
	sk, err := deriveKey(s, labelSidecarKey)
	if err != nil {
		return Identity{}, err
	}
	pk, err := deriveKey(s, labelPeerKey)
	if err != nil {
		return Identity{}, err
	}
	cred, err := expand(s, labelCredential, 32)
	if err != nil {
		return Identity{}, err
	}
	return Identity{SidecarKey: sk, PeerKey: pk, Credential: hex.EncodeToString(cred)}, nil
}

func deriveKey(secret, label string) (PrivateKey, error) {
	b, err := expand(secret, label, KeyLen)
	if err != nil {
		return PrivateKey{}, err
	}
	var k PrivateKey
	copy(k[:], b)
	k.clamp()
	return k, nil
}

func expand(secret, label string, n int) ([]byte, error) {
	b, err := hkdf.Key(sha256.New, []byte(secret), []byte(salt), label, n)
	if err != nil {
		return nil, fmt.Errorf("identity: derive %q: %w", label, err)
	}
	return b, nil
}
