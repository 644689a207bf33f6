package identity

import (
	"errors"
	"testing"
)

func TestDeriveAgreesAndSeparates(t *testing.T) {
	a, err := Derive("0123456789abcdef-secret")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Derive("0123456789abcdef-secret\n")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("same secret (with trailing newline) derived different identities")
	}
	if a.SidecarKey == a.PeerKey {
		t.Fatal("sidecar and peer keys are equal")
	}
	if a.SidecarKey.Hex()[:32] == a.Credential[:32] || a.PeerKey.Hex()[:32] == a.Credential[:32] {
		t.Fatal("credential shares bytes with a private key")
	}
	c, err := Derive("0123456789abcdef-other")
	if err != nil {
		t.Fatal(err)
	}
	if c.SidecarKey == a.SidecarKey || c.PeerKey == a.PeerKey || c.Credential == a.Credential {
		t.Fatal("different secrets derived overlapping identities")
	}
}

const vector = "a5q5LU+eROIrAaYyjHrM89/yPwX/xGtAauGLeOM38mk= sw8c1RJNApY+e/PMz+0SON4Atjhc5bUKqrKMXg2cIwI= 38dcc83a5de1c89dcb70d711eff773c133a85a68d30110b6ec5d801860af39a3"

// TestDeriveVector pins the derivation: peers of different versions must agree.
func TestDeriveVector(t *testing.T) {
	id, err := Derive("meshlaunch-test-vector-secret")
	if err != nil {
		t.Fatal(err)
	}
	got := id.SidecarKey.Public().String() + " " + id.PeerKey.Public().String() + " " + id.Credential
	if got != vector {
		t.Fatalf("derivation changed:\n got %s\nwant %s", got, vector)
	}
}

func TestDeriveShortSecret(t *testing.T) {
	_, err := Derive("  short  ")
	if !errors.Is(err, ErrShortSecret) {
		t.Fatalf("Derive(short) = %v, want ErrShortSecret", err)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	k, err := NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParsePrivateKey(k.String() + "\n")
	if err != nil || k2 != k {
		t.Fatalf("ParsePrivateKey(%s) = %v, %v", k, k2, err)
	}
	p, err := ParsePublicKey(k.Public().String())
	if err != nil || p != k.Public() {
		t.Fatalf("ParsePublicKey = %v, %v", p, err)
	}
	for _, bad := range []string{"", "not base64!", "AAAA"} {
		if _, err := ParsePrivateKey(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("ParsePrivateKey(%q) = %v, want ErrBadKey", bad, err)
		}
	}
}

func TestNewToken(t *testing.T) {
	a, _ := NewToken()
	b, _ := NewToken()
	if a == b || len(a) < MinSecretLen {
		t.Fatalf("tokens %q %q", a, b)
	}
	if _, err := Derive(a); err != nil {
		t.Fatal(err)
	}
}
