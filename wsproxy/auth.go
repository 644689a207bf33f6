package wsproxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Authenticator decides, before the upgrade, whether a request may open a
// session, and names the peer it belongs to. It must not log credentials.
type Authenticator interface {
	Authenticate(r *http.Request) (peer string, ok bool)
}

// BearerCredentials authenticates "Authorization: Bearer <credential>"
// against a fixed map of credential to peer name.
//
// Every entry is compared, in constant time on SHA-256 digests, whatever
// matches, so timing tells nothing about which credential (or how much of
// one) was right.
type BearerCredentials struct {
	entries []credEntry
}

type credEntry struct {
	digest [sha256.Size]byte
	peer   string
}

// NewBearerCredentials returns an Authenticator for creds (credential → peer).
func NewBearerCredentials(creds map[string]string) *BearerCredentials {
	b := &BearerCredentials{}
	for cred, peer := range creds {
		b.entries = append(b.entries, credEntry{digest: sha256.Sum256([]byte(cred)), peer: peer})
	}
	return b
}

// Authenticate implements Authenticator.
func (b *BearerCredentials) Authenticate(r *http.Request) (string, bool) {
	tok, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	d := sha256.Sum256([]byte(tok))
	peer, found := "", 0
	for _, e := range b.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			peer, found = e.peer, 1
		}
	}
	return peer, found == 1
}

func bearer(h string) (string, bool) {
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(prefix):])
	return tok, tok != ""
}
