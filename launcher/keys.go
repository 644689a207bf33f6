package launcher

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/meshapi"
)

// keys are what the launcher presents to one sidecar.
type keys struct {
	credential string              // the websocket and config API bearer credential
	private    identity.PrivateKey // the job's WireGuard key
	sidecar    identity.PublicKey  // the sidecar's, known after the configuration
	explicit   bool                // the job's own key: the sidecar has explicit peers
	derived    identity.Identity
}

// identity derives the credential (and, without a PrivateKey, the keys)
// from the secret.
func (rc RunConfig) identity() (keys, error) {
	id, err := identity.Derive(rc.Secret)
	if err != nil {
		return keys{}, fmt.Errorf("launcher: %w", err)
	}
	k := keys{credential: id.Credential, private: id.PeerKey, derived: id}
	if !rc.PrivateKey.IsZero() {
		k.private, k.explicit = rc.PrivateKey, true
	}
	return k, nil
}

// header names the job's public key to a sidecar with explicit peers.
func (k keys) header() http.Header {
	h := http.Header{}
	if k.explicit {
		h.Set(meshapi.PeerHeader, k.private.Public().String())
	}
	return h
}

// sidecarKey is the sidecar's public key: derived from the secret, or, for
// explicit peers, the one its configuration names.
func (rc RunConfig) sidecarKey(k keys, jc meshapi.JobConfig) (identity.PublicKey, error) {
	if !k.explicit {
		return k.derived.SidecarKey.Public(), nil
	}
	if jc.SidecarKey == "" {
		return identity.PublicKey{}, errors.New("launcher: the sidecar's configuration has no public key: it is older than this launcher; upgrade it, or drop --private-key-file")
	}
	pk, err := identity.ParsePublicKey(jc.SidecarKey)
	if err != nil {
		return identity.PublicKey{}, fmt.Errorf("launcher: the sidecar's public key %q: %w", jc.SidecarKey, err)
	}
	return pk, nil
}
