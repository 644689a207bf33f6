package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientConfigErrors: bad client configuration fails at start with a
// precise message and exit 2, before anything is dialed.
func TestClientConfigErrors(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("0123456789abcdef-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"ws with --require-tls (run)", []string{"run", "--server", "ws://mesh.example.org", "--token-file", tok, "--require-tls", "--", "true"}, "must be wss://"},
		{"ws with --require-tls (tunnel)", []string{"tunnel", "--server", "ws://mesh.example.org", "--token-file", tok, "--require-tls", "-L", "1:h:2"}, "must be wss://"},
		{"http scheme", []string{"run", "--server", "https://mesh.example.org", "--token-file", tok, "--", "true"}, "ws:// or wss://"},
		{"no server", []string{"run", "--token-file", tok, "--", "true"}, "--server is required"},
		{"short secret", []string{"run", "--server", "wss://mesh.example.org", "--token-file", short, "--", "true"}, "too short"},
		{"bad publish", []string{"run", "--server", "wss://mesh.example.org", "--token-file", tok, "--publish", "8080", "--", "true"}, "[BIND:]HOSTPORT:PORT"},
		{"bad host network", []string{"run", "--server", "wss://mesh.example.org", "--token-file", tok, "--host-network", "bridge", "--", "true"}, "allowed values are nat, none"},
		{"bad -L", []string{"tunnel", "--server", "wss://mesh.example.org", "--token-file", tok, "-L", "nonsense"}, "-L"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "", tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}
