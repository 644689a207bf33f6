package bench

import (
	"strings"
	"testing"
	"time"
)

// tracesSample is "go tool pprof -traces" output in the shape of Go 1.26's,
// with one sample of each category, a labelled sample and an inlined leaf.
const tracesSample = `File: meshlaunch
Type: cpu
Time: 2026-11-29 18:26:00 UTC
Duration: 4.01s, Total samples = 110ms ( 2.74%)
-----------+-------------------------------------------------------
      30ms   internal/runtime/syscall/linux.Syscall6
             syscall.RawSyscall6
             syscall.Syscall
             syscall.write
-----------+-------------------------------------------------------
      10ms   internal/runtime/syscall/linux.Syscall6
             internal/runtime/syscall/linux.EpollWait
             runtime.netpoll
             runtime.findRunnable
-----------+-------------------------------------------------------
  pprofkey:  value
      20ms   golang.org/x/crypto/chacha20poly1305.chacha20Poly1305Seal
             golang.org/x/crypto/chacha20poly1305.(*chacha20poly1305).Seal
-----------+-------------------------------------------------------
      15ms   github.com/coder/websocket.maskAsm
             github.com/coder/websocket.mask (inline)
-----------+-------------------------------------------------------
      10ms   runtime.memmove
             io.copyBuffer
-----------+-------------------------------------------------------
       5ms   gvisor.dev/gvisor/pkg/tcpip/checksum.Checksum (inline)
             gvisor.dev/gvisor/pkg/tcpip/header.TCP.CalculateChecksum
-----------+-------------------------------------------------------
      10ms   runtime.futex
             runtime.futexwakeup
-----------+-------------------------------------------------------
      10ms   github.com/meshlaunch/meshlaunch/wsproxy.(*link).write
-----------+-------------------------------------------------------
`

// TestParseTracesCategories: parseTraces reads the profile's length,
// total, flat time per function and category of every sample from pprof's
// -traces output; epoll_wait under the scheduler is Go runtime, not a
// syscall; malformed output is an error, not zeros.
func TestParseTracesCategories(t *testing.T) {
	s, err := parseTraces(tracesSample)
	if err != nil {
		t.Fatal(err)
	}
	if s.duration != 4010*time.Millisecond || s.total != 110*time.Millisecond {
		t.Fatalf("duration %v, total %v; want 4.01s and 110ms", s.duration, s.total)
	}
	want := map[string]time.Duration{
		"syscall": 30 * time.Millisecond, "crypto": 20 * time.Millisecond, "mask": 15 * time.Millisecond,
		"memmove": 10 * time.Millisecond, "gvisor": 5 * time.Millisecond, "runtime": 20 * time.Millisecond,
		"other": 10 * time.Millisecond,
	}
	for _, c := range profileCategories {
		if s.byCat[c.key] != want[c.key] {
			t.Errorf("category %s: %v, want %v", c.key, s.byCat[c.key], want[c.key])
		}
	}
	if got := s.share("syscall"); got < 0.27 || got > 0.28 {
		t.Errorf("share of syscalls %.3f, want 30/110", got)
	}
	top := s.top(3)
	if len(top) != 3 || top[0].name != "internal/runtime/syscall/linux.Syscall6" || top[0].flat != 40*time.Millisecond ||
		top[1].name != "golang.org/x/crypto/chacha20poly1305.chacha20Poly1305Seal" || top[2].name != "github.com/coder/websocket.maskAsm" {
		t.Errorf("top 3 = %v", top)
	}
	if s.flat["gvisor.dev/gvisor/pkg/tcpip/checksum.Checksum"] != 5*time.Millisecond {
		t.Errorf("inlined leaf not read without its marker: %v", s.flat)
	}

	for name, bad := range map[string]string{
		"no header":  strings.Replace(tracesSample, "Duration: 4.01s", "Length: 4.01s", 1),
		"no samples": tracesSample[:strings.Index(tracesSample, "-----------+")],
		"bad value":  strings.Replace(tracesSample, "      30ms   internal", "      lots   internal", 1),
	} {
		if _, err := parseTraces(bad); err == nil {
			t.Errorf("%s: parseTraces accepted it", name)
		}
	}
}
