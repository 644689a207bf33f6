package bench

import (
	"fmt"
	"strings"
	"time"
)

// profileTopN is how many functions the report lists per profile.
const profileTopN = 8

// profileTables are the profiling phase's two tables: where each
// process's CPU went by category, and its top functions by flat time.
func (b *bench) profileTables() string {
	ph := &b.res.profiles
	if len(ph.paths) == 0 {
		return "No path of meshlaunch's was profiled in this run.\n"
	}
	var w strings.Builder
	w.WriteString("| path | process | iperf3, Gbit/s | CPU sampled (of one core) |")
	for _, c := range profileCategories {
		w.WriteString(" " + c.label + " |")
	}
	w.WriteString("\n|---|---|--:|--:|" + strings.Repeat("--:|", len(profileCategories)) + "\n")
	for _, pp := range ph.paths {
		rate := "failed"
		if pp.iperfErr == "" {
			rate = gbps(pp.bps)
		}
		for _, pr := range pp.procs {
			if pr.err != "" {
				fmt.Fprintf(&w, "| %s | %s | %s | not available: %s |%s\n", pp.path.name, pr.proc, rate,
					strings.ReplaceAll(pr.err, "|", `\|`), strings.Repeat(" |", len(profileCategories)))
				continue
			}
			s := pr.sum
			fmt.Fprintf(&w, "| %s | %s | %s | %.2f s of %.1f s (%.0f%%) |", pp.path.name, pr.proc, rate,
				s.total.Seconds(), s.duration.Seconds(), 100*s.total.Seconds()/s.duration.Seconds())
			for _, c := range profileCategories {
				fmt.Fprintf(&w, " %.0f%% |", 100*s.share(c.key))
			}
			w.WriteString("\n")
		}
	}
	fmt.Fprintf(&w, "\n| path | process | top %d functions by flat time (share of the process's samples) |\n|---|---|---|\n", profileTopN)
	for _, pp := range ph.paths {
		for _, pr := range pp.procs {
			if pr.err != "" {
				continue
			}
			var fs []string
			for _, f := range pr.sum.top(profileTopN) {
				fs = append(fs, fmt.Sprintf("`%s` %.1f%%", f.name, 100*float64(f.flat)/float64(pr.sum.total)))
			}
			fmt.Fprintf(&w, "| %s | %s | %s |\n", pp.path.name, pr.proc, strings.Join(fs, ", "))
		}
	}
	return w.String()
}

// writeProfiles writes the "Profiles" section of docs/benchmarks.md.
func (b *bench) writeProfiles(w *strings.Builder) {
	ph := &b.res.profiles
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("## Profiles\n\n")
	p("After the measurement rounds, one more one-stream iperf3 run of %d s per path of meshlaunch's (client and server as above) ", profileTransfer)
	p("and, from %.0f s into it, past the connections and handshakes, a CPU profile of %d s of each meshlaunch process on the path, all at once: ",
		profileOffset.Seconds(), profileSeconds)
	p("the sidecar and the launcher for the mesh, the launcher for the host NAT, the sidecar and the tunnel for the tunnel. ")
	p("Each process serves Go's `net/http/pprof` on its `--pprof-addr`, the loopback of its own namespace (the sidecar `%s` in pod, ", sidecarPprof)
	p("the launcher `%s` and the tunnel `%s` in node), and the benchmark fetches `/debug/pprof/profile?seconds=%d` from inside that namespace. ",
		launcherPprof, tunnelPprof, profileSeconds)
	p("The profiler's own cost lowers the rate a little; the iperf3 column is this run's, not the table's median. ")
	p("The phase took %s.\n\n", ph.elapsed.Round(time.Second))
	p("Each sample's CPU time (user and kernel: time in a syscall is charged to the function that made it) goes to one column by the ")
	p("function it was taken in (its flat time): **syscalls** (`internal/runtime/syscall`, `syscall.Syscall*`, `golang.org/x/sys/unix.Syscall*`, ")
	p("`runtime.entersyscall`/`exitsyscall`; read, write, sendmsg and the like on sockets and the TUN), except the scheduler's `epoll_wait`; ")
	p("**crypto** (`crypto/…`, `golang.org/x/crypto/…`: WireGuard's ChaCha20-Poly1305, TLS's AES-GCM); **websocket masking** ")
	p("(`github.com/coder/websocket.mask*`); **memmove** (`runtime.memmove`, the copies); **gVisor netstack** (`gvisor.dev/…`: ")
	p("the sidecar's TCP/IP stack and the launcher's host NAT); **Go runtime** (the rest of `runtime.…`: scheduler, `epoll_wait`, futex, ")
	p("GC, allocation); **other** (everything else: meshlaunch's own code, `net`, `io`, `bufio`, WireGuard's non-crypto code). ")
	p("\"CPU sampled\" is the profile's total over its length: 100%% is one core.\n\n")
	if ph.na != "" {
		p("Not summarised: %s.\n\n", ph.na)
	}
	p("%s\n", b.profileTables())
	p("To reproduce: `MESHLAUNCH_BENCH_PROFILES=DIR` keeps the raw profiles of a run as `DIR/<path>-<process>.pb.gz` ")
	p("(otherwise they go to a temporary directory that is removed); read them with `go tool pprof -top DIR/mesh-out-sidecar.pb.gz` ")
	p("or `go tool pprof -http=127.0.0.1:8000 DIR/mesh-out-sidecar.pb.gz`. ")
	p("Any meshlaunch process started with `--pprof-addr 127.0.0.1:6060` can be profiled the same way during a transfer: ")
	p("`go tool pprof 'http://127.0.0.1:6060/debug/pprof/profile?seconds=%d'`.\n\n", profileSeconds)
}
