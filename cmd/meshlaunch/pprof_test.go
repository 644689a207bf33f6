package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for a command writing its logs
// while the test reads them.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logField waits until a JSON log record with message msg appears in logs
// and returns its field key.
func logField(t *testing.T, logs *lockedBuffer, exited <-chan int, msg, key string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
				if v, ok := rec[key].(string); ok {
					return v
				}
			}
		}
		select {
		case code := <-exited:
			t.Fatalf("meshlaunch exited (%d) before logging %q:\n%s", code, msg, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log record %q with %s within 20 s:\n%s", msg, key, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get fetches url and returns the status and body.
func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// runCLIWithin is runCLI with a context that ends after d, so that a
// command that should have been refused but started ends too.
func runCLIWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"meshlaunch"}, args...), strings.NewReader(""), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func writeToken(t *testing.T) string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("0123456789abcdef-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestPprofAddrServesProfilesUntilTheCommandEnds: with --pprof-addr, a
// running sidecar serves the net/http/pprof index and a CPU profile on
// that address, not on its main listener, and the endpoint is gone once
// the command has returned.
func TestPprofAddrServesProfilesUntilTheCommandEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedBuffer{}
	exited := make(chan int, 1)
	args := []string{"meshlaunch", "--log-format", "json", "sidecar", "--listen", "127.0.0.1:0",
		"--token-file", writeToken(t), "--pod-ip", "10.244.1.5", "--shutdown-grace", "1s",
		"--pprof-addr", "127.0.0.1:0"}
	go func() { exited <- run(ctx, args, strings.NewReader(""), io.Discard, logs) }()
	pprofAddr := logField(t, logs, exited, "serving pprof profiles; for profiling only", "addr")
	mainAddr := logField(t, logs, exited, "sidecar ready", "listen")
	if pprofAddr == mainAddr {
		t.Fatalf("pprof endpoint and main listener share %s", pprofAddr)
	}

	reqCtx, reqCancel := context.WithTimeout(ctx, 30*time.Second)
	defer reqCancel()
	code, body, err := get(reqCtx, "http://"+pprofAddr+"/debug/pprof/")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "goroutine") || !strings.Contains(body, "profile") {
		t.Fatalf("GET /debug/pprof/ on %s: %d, %v:\n%.400s", pprofAddr, code, err, body)
	}
	code, body, err = get(reqCtx, "http://"+pprofAddr+"/debug/pprof/profile?seconds=1")
	if err != nil || code != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET /debug/pprof/profile?seconds=1: %d, %v, %d bytes", code, err, len(body))
	}
	// The main listener is the sidecar's own: no profiles there.
	if code, _, err := get(reqCtx, "http://"+mainAddr+"/debug/pprof/"); err != nil || code == http.StatusOK {
		t.Fatalf("GET /debug/pprof/ on the main listener %s: %d, %v; want an answer other than 200", mainAddr, code, err)
	}

	cancel()
	select {
	case code := <-exited:
		if code != exitOK {
			t.Fatalf("sidecar exited %d after its context ended:\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sidecar still running 30 s after its context ended:\n%s", logs.String())
	}
	if c, err := net.DialTimeout("tcp", pprofAddr, 5*time.Second); err == nil {
		c.Close()
		t.Fatalf("pprof endpoint %s still accepts connections after the command returned", pprofAddr)
	}
}

// TestPprofAddrMustBeLoopback: sidecar, run and tunnel refuse a
// --pprof-addr (or $MESHLAUNCH_PPROF_ADDR) that is not a loopback
// HOST:PORT with a usage error that says how to fix it; loopback
// addresses pass the same check.
func TestPprofAddrMustBeLoopback(t *testing.T) {
	tok := writeToken(t)
	commands := map[string][]string{
		"sidecar": {"sidecar", "--listen", "127.0.0.1:0", "--token-file", tok, "--pod-ip", "10.244.1.5"},
		// Should the check regress, these dial a closed loopback port and
		// give up, instead of reaching out.
		"run":    {"run", "--server", "wss://127.0.0.1:1", "--token-file", tok, "--wait", "2s"},
		"tunnel": {"tunnel", "--server", "wss://127.0.0.1:1", "--token-file", tok, "-L", "127.0.0.1:1:127.0.0.1:1"},
	}
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.244.1.5:6060", "[::]:6060", "localhost:6060", "127.0.0.1"} {
		for name, argv := range commands {
			t.Run(fmt.Sprintf("%s %s", name, addr), func(t *testing.T) {
				args := append(append([]string{}, argv...), "--pprof-addr", addr)
				if name == "run" {
					args = append(args, "--", "true")
				}
				r := runCLIWithin(t, 20*time.Second, args...)
				if r.code != exitUsage {
					t.Fatalf("exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
				}
				for _, w := range []string{"--pprof-addr", "MESHLAUNCH_PPROF_ADDR", "loopback", "127.0.0.1"} {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr %q does not mention %q", r.stderr, w)
					}
				}
			})
		}
	}
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv(envName(flagPprofAddr), "0.0.0.0:6060")
		r := runCLIWithin(t, 20*time.Second, commands["sidecar"]...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "not a loopback address") {
			t.Fatalf("exit %d, stderr %q; want exit 2 and the loopback error", r.code, r.stderr)
		}
	})
	// Positive control: the check passes loopback addresses, IPv4 and IPv6.
	for _, addr := range []string{"127.0.0.1:6060", "127.0.0.2:0", "[::1]:6060", "[::ffff:127.0.0.1]:6060"} {
		if err := checkPprofAddr(addr); err != nil {
			t.Errorf("checkPprofAddr(%q) = %v, want nil", addr, err)
		}
	}
}
