package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// profileCategory is where a CPU sample's own (flat) time went, judged by
// the function it was taken in and, for syscalls, its callers.
type profileCategory struct{ key, label string }

// profileCategories in the order of the report's columns; classifyStack
// picks one for every sample.
var profileCategories = []profileCategory{
	{"syscall", "syscalls"},
	{"crypto", "crypto"},
	{"mask", "websocket masking"},
	{"memmove", "memmove"},
	{"gvisor", "gVisor netstack"},
	{"runtime", "Go runtime"},
	{"other", "other"},
}

// profileSummary is one CPU profile reduced to the report's numbers.
type profileSummary struct {
	duration time.Duration            // the profile's length
	total    time.Duration            // CPU time sampled in it
	byCat    map[string]time.Duration // category key → flat time
	flat     map[string]time.Duration // function → flat time
}

// share is the fraction of the sampled CPU time spent in category key.
func (s profileSummary) share(key string) float64 {
	if s.total == 0 {
		return 0
	}
	return float64(s.byCat[key]) / float64(s.total)
}

// funcTime is one function's flat time.
type funcTime struct {
	name string
	flat time.Duration
}

// top lists the n functions with the most flat time, most first.
func (s profileSummary) top(n int) []funcTime {
	var fs []funcTime
	for name, d := range s.flat {
		fs = append(fs, funcTime{name, d})
	}
	slices.SortFunc(fs, func(a, b funcTime) int {
		return cmp.Or(cmp.Compare(b.flat, a.flat), strings.Compare(a.name, b.name))
	})
	return fs[:min(n, len(fs))]
}

// goCommand finds the go command: go test puts its GOROOT/bin first in
// $PATH; $GOROOT/bin otherwise.
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no go command in $PATH or $GOROOT/bin to run 'go tool pprof'")
}

// summariseProfile reads the profile in file with "go tool pprof -traces"
// (every sampled stack with its CPU time).
func summariseProfile(ctx context.Context, goBin, file string) (profileSummary, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, goBin, "tool", "pprof", "-traces", file)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return profileSummary{}, fmt.Errorf("go tool pprof -traces %s: %w: %s", filepath.Base(file), err, lastLine(stderr.String()))
	}
	s, err := parseTraces(string(out))
	if err != nil {
		return s, fmt.Errorf("go tool pprof -traces %s: %w", filepath.Base(file), err)
	}
	return s, nil
}

// tracesSeparator starts every sample's block in "pprof -traces" output.
const tracesSeparator = "-----------+"

// parseTraces reads "pprof -traces" output: a header with "Duration: 4s,
// Total samples = …", then a block for each sample: its labels, if any
// ("key:  value"), then its CPU time and its stack, leaf first, one frame
// a line (inlined frames on lines of their own, marked " (inline)").
func parseTraces(text string) (profileSummary, error) {
	s := profileSummary{byCat: map[string]time.Duration{}, flat: map[string]time.Duration{}}
	blocks := strings.Split(text, tracesSeparator)
	for line := range strings.Lines(blocks[0]) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Duration: "); ok {
			d, _, _ := strings.Cut(rest, ",")
			s.duration, _ = time.ParseDuration(d)
		}
	}
	if s.duration == 0 {
		return s, errors.New("no profile duration in the header")
	}
	for _, blk := range blocks[1:] {
		lines := strings.Split(blk, "\n")[1:] // the rest of the separator line
		var value time.Duration
		var stack []string
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			if stack == nil && strings.HasSuffix(f[0], ":") {
				continue // a label of the sample, before its stack
			}
			if stack == nil {
				d, err := time.ParseDuration(f[0])
				if err != nil || len(f) < 2 {
					return s, fmt.Errorf("sample line %q: want a time and a function", l)
				}
				value, f = d, f[1:]
			}
			stack = append(stack, strings.TrimSuffix(strings.Join(f, " "), " (inline)"))
		}
		if len(stack) == 0 {
			continue
		}
		s.total += value
		s.flat[stack[0]] += value
		s.byCat[classifyStack(stack)] += value
	}
	if s.total == 0 {
		return s, errors.New("no samples")
	}
	return s, nil
}

// classifyStack puts one sample (stack leaf first) in a category of
// profileCategories by its leaf function; a syscall made by the
// scheduler's network poller (epoll_wait) counts as Go runtime.
func classifyStack(stack []string) string {
	leaf := stack[0]
	switch {
	case strings.HasPrefix(leaf, "github.com/coder/websocket.mask"):
		return "mask"
	case hasPrefix(leaf, "crypto/", "golang.org/x/crypto/", "vendor/golang.org/x/crypto/"):
		return "crypto"
	case leaf == "runtime.memmove":
		return "memmove"
	case strings.HasPrefix(leaf, "gvisor.dev/"):
		return "gvisor"
	case isSyscall(leaf):
		if slices.ContainsFunc(stack, func(f string) bool { return strings.HasPrefix(f, "runtime.netpoll") }) {
			return "runtime"
		}
		return "syscall"
	case hasPrefix(leaf, "runtime.", "internal/runtime/", "gcWriteBarrier"):
		return "runtime"
	}
	return "other"
}

// isSyscall: the functions that enter the kernel (or the runtime's
// bookkeeping around it); a CPU sample taken in the kernel is charged to
// them.
func isSyscall(fn string) bool {
	return hasPrefix(fn, "internal/runtime/syscall.", "internal/runtime/syscall/", "runtime/internal/syscall.",
		"syscall.Syscall", "syscall.RawSyscall", "syscall.rawSyscall", "syscall.rawVforkSyscall",
		"golang.org/x/sys/unix.Syscall", "golang.org/x/sys/unix.RawSyscall",
		"runtime.entersyscall", "runtime.exitsyscall", "runtime.reentersyscall")
}

func hasPrefix(s string, prefixes ...string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}
