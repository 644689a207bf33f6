package identity

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// KeyLen is the length of a WireGuard key in bytes.
const KeyLen = 32

// ErrBadKey reports a key that is not 32 bytes of base64.
var ErrBadKey = errors.New("identity: bad key")

// PrivateKey is a Curve25519 private key as WireGuard uses it.
type PrivateKey [KeyLen]byte

// PublicKey is a Curve25519 public key.
type PublicKey [KeyLen]byte

// NewPrivateKey returns a fresh random private key.
func NewPrivateKey() (PrivateKey, error) {
	var k PrivateKey
	if _, err := rand.Read(k[:]); err != nil {
		return PrivateKey{}, fmt.Errorf("identity: read random key: %w", err)
	}
	k.clamp()
	return k, nil
}

func (k *PrivateKey) clamp() {
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
}

// Public returns the public key of k.
func (k PrivateKey) Public() PublicKey {
	var p PublicKey
	pub, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil {
		// Only a low-order result fails, which a clamped scalar times the
		// base point cannot produce.
		panic("identity: X25519 with base point failed: " + err.Error())
	}
	copy(p[:], pub)
	return p
}

// String is the base64 form used by wg(8) and in configuration files.
func (k PrivateKey) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Hex is the form wireguard-go's UAPI expects.
func (k PrivateKey) Hex() string { return hex.EncodeToString(k[:]) }

// IsZero reports whether k is unset.
func (k PrivateKey) IsZero() bool {
	var z PrivateKey
	return subtle.ConstantTimeCompare(k[:], z[:]) == 1
}

// String is the base64 form.
func (p PublicKey) String() string { return base64.StdEncoding.EncodeToString(p[:]) }

// Hex is the form wireguard-go's UAPI expects.
func (p PublicKey) Hex() string { return hex.EncodeToString(p[:]) }

// ParsePrivateKey parses a base64 private key; surrounding space is ignored.
func ParsePrivateKey(s string) (PrivateKey, error) {
	b, err := parseKey(s)
	if err != nil {
		return PrivateKey{}, err
	}
	var k PrivateKey
	copy(k[:], b)
	return k, nil
}

// ParsePublicKey parses a base64 public key; surrounding space is ignored.
func ParsePublicKey(s string) (PublicKey, error) {
	b, err := parseKey(s)
	if err != nil {
		return PublicKey{}, err
	}
	var p PublicKey
	copy(p[:], b)
	return p, nil
}

func parseKey(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64: %w", ErrBadKey, err)
	}
	if len(b) != KeyLen {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(b), KeyLen)
	}
	return b, nil
}

// NewToken returns a fresh random secret for `meshlaunch token`: 32 random
// bytes, URL-safe base64 without padding (43 characters).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("identity: read random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
