package sidecar

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/internal/meshtest"
	"github.com/meshlaunch/meshlaunch/meshapi"
)

// TestWrongCredentialIsNeverLogged: upgrades and API requests with a
// missing or wrong credential get 401 with the same body every time and
// are counted; with debug logging on, neither the credentials presented
// nor the real one (nor the secret) appear in the sidecar's log, which
// does record the session the right credential opens.
func TestWrongCredentialIsNeverLogged(t *testing.T) {
	var logs syncBuffer
	r := startSidecar(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	id, _ := identity.Derive(meshtest.Secret)
	presented := []string{
		"wrong-credential-4f1c9a7e2b",
		id.Credential[:len(id.Credential)-1] + "X", // one character off
		id.Credential + "suffix",
	}
	auths := []string{"", "Basic " + id.Credential}
	for _, p := range presented {
		auths = append(auths, "Bearer "+p)
	}
	var bodies []string
	for _, path := range []string{meshapi.MeshPath, meshapi.StatusPath} {
		for _, auth := range auths {
			req, _ := http.NewRequest(http.MethodGet, r.base+path, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			req.Header.Set("Sec-WebSocket-Protocol", "meshlaunch.wg.v1")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s with %q: %s, want 401", path, auth, resp.Status)
			}
			bodies = append(bodies, string(b))
		}
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("refusal bodies differ: %q and %q", bodies[0], b)
		}
	}
	// Positive control: the right credential opens a session, which is logged.
	startJob(t, r)
	m := get(t, r.base+"/metrics", "")
	for _, want := range []string{`meshlaunch_auth_failures_total{endpoint="mesh"} 5`, `meshlaunch_auth_failures_total{endpoint="api"} 5`} {
		if !strings.Contains(m, want) {
			t.Fatalf("want %s:\n%s", want, grep(m, "auth_failures"))
		}
	}
	out := logs.String()
	if !strings.Contains(out, "session opened") {
		t.Fatalf("the log lacks the session the right credential opened:\n%s", out)
	}
	for _, secret := range append(presented, id.Credential, meshtest.Secret) {
		if strings.Contains(out, secret) {
			t.Fatalf("the log contains a credential (%.6s…):\n%s", secret, out)
		}
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
