package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlaunch/meshlaunch/identity"
)

// result is what one in-process invocation of meshlaunch produced.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs meshlaunch with args and stdin in-process.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"meshlaunch"}, args...), strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// mustSucceed fails the test unless r is a success with nothing on stderr.
func (r result) mustSucceed(t *testing.T) {
	t.Helper()
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q, want exit 0 and no stderr", r.code, r.stderr)
	}
}

func TestKeygenPubkeyRoundTrip(t *testing.T) {
	t.Parallel()
	gen := runCLI(t, "", "keygen")
	gen.mustSucceed(t)
	if !strings.HasSuffix(gen.stdout, "\n") || strings.Count(gen.stdout, "\n") != 1 {
		t.Fatalf("keygen printed %q, want one line", gen.stdout)
	}
	key, err := identity.ParsePrivateKey(gen.stdout)
	if err != nil {
		t.Fatalf("keygen printed %q: %v", gen.stdout, err)
	}
	if key.String()+"\n" != gen.stdout {
		t.Fatalf("keygen printed %q, not canonical base64 %q", gen.stdout, key.String())
	}

	pub := runCLI(t, gen.stdout, "pubkey")
	pub.mustSucceed(t)
	if want := key.Public().String() + "\n"; pub.stdout != want {
		t.Fatalf("pubkey printed %q, identity says %q", pub.stdout, want)
	}

	if again := runCLI(t, "", "keygen"); again.stdout == gen.stdout {
		t.Fatalf("two keygen runs printed the same key %q", gen.stdout)
	}
}

func TestPubkeyRejectsBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, stdin, want string }{
		{"empty", "", "meshlaunch: pubkey: stdin is empty: "},
		{"blank", " \n", "meshlaunch: pubkey: stdin is empty: "},
		{"not base64", "not base64!\n", "meshlaunch: pubkey: stdin is not a WireGuard private key: "},
		{"short", "AAAA\n", "meshlaunch: pubkey: stdin is not a WireGuard private key: "},
		{"public key of 33 bytes", base64.StdEncoding.EncodeToString(make([]byte, 33)), "meshlaunch: pubkey: stdin is not a WireGuard private key: "},
		{"huge", strings.Repeat("A", 1<<20), "meshlaunch: pubkey: stdin is not a WireGuard private key: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.stdin, "pubkey")
			if r.code != exitFailure {
				t.Errorf("exit %d, want %d", r.code, exitFailure)
			}
			if !strings.HasPrefix(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr %q, want one line starting %q", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 20 {
		r := runCLI(t, "", "token")
		r.mustSucceed(t)
		tok, ok := strings.CutSuffix(r.stdout, "\n")
		if !ok || strings.Contains(tok, "\n") {
			t.Fatalf("token printed %q, want one line", r.stdout)
		}
		if b, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(b) != 32 {
			t.Fatalf("token %q is not 32 bytes of unpadded URL-safe base64 (%d bytes, %v)", tok, len(b), err)
		}
		if len(tok) < identity.MinSecretLen {
			t.Fatalf("token %q shorter than identity.MinSecretLen", tok)
		}
		if _, err := identity.Derive(tok); err != nil {
			t.Fatalf("identity.Derive(%q): %v", tok, err)
		}
		if seen[tok] {
			t.Fatalf("token %q printed twice", tok)
		}
		seen[tok] = true
	}
}

// Not parallel: it sets the package variable version.
func TestVersion(t *testing.T) {
	format := regexp.MustCompile(`^meshlaunch (\S+) \(go[0-9][^,]*, [a-z0-9]+/[a-z0-9]+\)\n$`)

	r := runCLI(t, "", "version")
	r.mustSucceed(t)
	if !format.MatchString(r.stdout) {
		t.Fatalf("version printed %q, want it to match %s", r.stdout, format)
	}

	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3-4-gabcdef0-dirty"
	r = runCLI(t, "", "version")
	r.mustSucceed(t)
	if m := format.FindStringSubmatch(r.stdout); m == nil || m[1] != version {
		t.Fatalf("version printed %q, want version %s", r.stdout, version)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string // substrings of the single stderr line
	}{
		{
			name: "bad log level flag",
			args: []string{"--log-level", "verbose", "version"},
			want: []string{`"verbose"`, "--log-level", "debug, info, warn, error"},
		},
		{
			name: "bad log level flag after command",
			args: []string{"version", "--log-level=trace"},
			want: []string{`"trace"`, "--log-level", "debug, info, warn, error"},
		},
		{
			name: "bad log format flag",
			args: []string{"--log-format", "xml", "keygen"},
			want: []string{`"xml"`, "--log-format", "text, json"},
		},
		{
			name: "bad log level from environment",
			env:  map[string]string{"MESHLAUNCH_LOG_LEVEL": "bogus"},
			args: []string{"version"},
			want: []string{`"bogus"`, "MESHLAUNCH_LOG_LEVEL", "debug, info, warn, error"},
		},
		{
			name: "bad log format from environment",
			env:  map[string]string{"MESHLAUNCH_LOG_FORMAT": "yaml"},
			args: []string{"token"},
			want: []string{`"yaml"`, "MESHLAUNCH_LOG_FORMAT", "text, json"},
		},
		{
			name: "unknown flag",
			args: []string{"--frobnicate", "version"},
			want: []string{"frobnicate", "meshlaunch --help"},
		},
		{
			name: "unknown command flag",
			args: []string{"keygen", "--bits=4096"},
			want: []string{"keygen: ", "bits", "meshlaunch keygen --help"},
		},
		{
			name: "unknown command",
			args: []string{"frobnicate"},
			want: []string{`unknown command "frobnicate"`},
		},
		{
			name: "unexpected argument",
			args: []string{"token", "extra"},
			want: []string{"token takes no arguments", "extra"},
		},
		{
			name: "no command",
			want: []string{"no command given"},
		},
		{
			name: "TCP buffer budget out of range",
			env:  map[string]string{"MESHLAUNCH_TOKEN": "0123456789abcdef0123456789abcdef", "POD_IP": "10.1.1.1"},
			args: []string{"sidecar", "--listen", "127.0.0.1:0", "--tcp-buffer-mib", "0"},
			want: []string{"--tcp-buffer-mib 0", "want 1..65536"},
		},
		{
			name: "help for unknown command",
			args: []string{"help", "frobnicate"},
			want: []string{"frobnicate"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r := runCLI(t, "", tc.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d", r.code, exitUsage)
			}
			if !strings.HasPrefix(r.stderr, "meshlaunch: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr %q, want one line starting %q", r.stderr, "meshlaunch: ")
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not mention %q", r.stderr, w)
				}
			}
		})
	}
}

func TestLoggingFromEnvironment(t *testing.T) {
	t.Setenv("MESHLAUNCH_LOG_LEVEL", "debug")
	t.Setenv("MESHLAUNCH_LOG_FORMAT", "json")
	r := runCLI(t, "", "version")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, `{"time":`) || !strings.Contains(r.stderr, `"level":"DEBUG"`) {
		t.Fatalf("stderr %q, want a JSON debug record", r.stderr)
	}

	// The command line wins over the environment.
	t.Setenv("MESHLAUNCH_LOG_LEVEL", "bogus")
	r = runCLI(t, "", "--log-level=error", "version")
	r.mustSucceed(t)
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "--help")
	r.mustSucceed(t)
	for _, w := range []string{
		"sidecar", "launcher", "tunnel", "no privileges", "shared secret",
		"token", "keygen", "pubkey", "version",
		"MESHLAUNCH_LOG_LEVEL", "MESHLAUNCH_LOG_FORMAT", "Exit status",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("root help does not mention %q", w)
		}
	}

	for _, cmd := range []string{"token", "keygen", "pubkey", "version"} {
		r := runCLI(t, "", cmd, "--help")
		r.mustSucceed(t)
		if !strings.Contains(r.stdout, "meshlaunch "+cmd) {
			t.Errorf("help of %s:\n%s", cmd, r.stdout)
		}
	}
}
