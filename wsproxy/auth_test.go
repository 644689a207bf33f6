package wsproxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestUpgradeRefusedBeforeAuthentication(t *testing.T) {
	srv, hs := newTestServer(t, ServerConfig{})
	cases := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"no credential", map[string]string{}, http.StatusUnauthorized},
		{"wrong credential", map[string]string{"Authorization": "Bearer wrong-credential-0000000"}, http.StatusUnauthorized},
		{"wrong scheme", map[string]string{"Authorization": "Basic " + testCred}, http.StatusUnauthorized},
		{"right credential, no subprotocol", map[string]string{"Authorization": "Bearer " + testCred}, http.StatusBadRequest},
		// Positive control: the same request with the subprotocol upgrades.
		{"right credential", map[string]string{"Authorization": "Bearer " + testCred, "Sec-WebSocket-Protocol": Subprotocol}, http.StatusSwitchingProtocols},
	}
	var bodies []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, hs.URL+"/mesh", nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if resp.StatusCode == http.StatusUnauthorized {
				b, _ := io.ReadAll(resp.Body)
				bodies = append(bodies, string(b))
			}
		})
	}
	for _, b := range bodies {
		if b != unauthorizedBody {
			t.Errorf("401 body %q, want the constant %q", b, unauthorizedBody)
		}
	}
	if got := srv.Stats().AuthFailures; got != 3 {
		t.Errorf("AuthFailures = %d, want 3", got)
	}
}

func TestBearerCredentialsPeers(t *testing.T) {
	a := NewBearerCredentials(map[string]string{"cred-one-000000000": "one", "cred-two-000000000": "two"})
	for _, tc := range []struct{ hdr, peer string }{
		{"Bearer cred-one-000000000", "one"},
		{"bearer cred-two-000000000", "two"},
		{"Bearer cred-three-00000000", ""},
		{"Bearer ", ""},
		{"", ""},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", strings.NewReader(""))
		r.Header.Set("Authorization", tc.hdr)
		peer, ok := a.Authenticate(r)
		if peer != tc.peer || ok != (tc.peer != "") {
			t.Errorf("Authenticate(%q) = %q, %v; want %q", tc.hdr, peer, ok, tc.peer)
		}
	}
}
