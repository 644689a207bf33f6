package nslauncher

import (
	"strings"
	"testing"
	"time"
)

// TestWrongSecret: a launcher whose secret differs from the sidecar's is
// refused (401) and gives up at once, long before its --wait; the same
// launcher with the right secret runs its job.
func TestWrongSecret(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	if _, stderr, code := c.run(t, launch{}, "true"); code != 0 {
		t.Fatalf("positive control: launcher with the right secret exited %d\nstderr:\n%s", code, stderr)
	}
	wrong := c.NewToken(t, "wrong-token")
	start := time.Now()
	_, stderr, code := c.run(t, launch{token: wrong, timeout: 20 * time.Second}, "true")
	elapsed := time.Since(start)
	if code == 0 {
		t.Fatalf("launcher with a wrong secret exited 0\nstderr:\n%s", stderr)
	}
	if elapsed > 10*time.Second {
		t.Errorf("launcher with a wrong secret took %v to fail, want < 10 s (--wait is 30 s: it must not retry)", elapsed)
	}
	wantMention(t, stderr, "401", "refused")
	t.Logf("wrong secret: exit %d after %v: %s", code, elapsed.Round(time.Millisecond), strings.TrimSpace(stderr))
}

// TestTunPermissionError: with /dev/net/tun at 0600 the launcher, an
// ordinary user, cannot open it and says what to ask the admin for; at
// 0666 the same launcher runs its job.
func TestTunPermissionError(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	if _, stderr, code := c.run(t, launch{tunMode: 0o666}, "true"); code != 0 {
		t.Fatalf("positive control: launcher with /dev/net/tun at 0666 exited %d\nstderr:\n%s", code, stderr)
	}
	_, stderr, code := c.run(t, launch{tunMode: 0o600, timeout: 20 * time.Second}, "true")
	if code == 0 {
		t.Fatalf("launcher with /dev/net/tun at 0600 exited 0\nstderr:\n%s", stderr)
	}
	wantMention(t, stderr, "/dev/net/tun", "0666")
	t.Logf("/dev/net/tun 0600: exit %d: %s", code, strings.TrimSpace(stderr))
}

// wantMention checks that a message holds every one of subs.
func wantMention(t *testing.T, msg string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			t.Errorf("message does not mention %q:\n%s", s, msg)
		}
	}
}
