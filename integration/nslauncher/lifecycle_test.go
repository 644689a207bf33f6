package nslauncher

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExitCodeAndSignals: the launcher exits with the job's status, and
// a SIGTERM to the launcher ends the job and everything it started.
func TestExitCodeAndSignals(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	t.Run("exit-42", func(t *testing.T) {
		_, stderr, code := c.run(t, launch{}, "sh", "-c", "exit 42")
		if code != 42 {
			t.Errorf("launcher exited %d, want the job's 42\nstderr:\n%s", code, stderr)
		}
	})
	t.Run("sigterm", func(t *testing.T) {
		// The job leaves a background sleep behind, which must die with it.
		p := c.start(t, launch{}, "sh", "-c", "sleep 1000 & echo started; exec sleep 1000")
		waitOutput(t, p, 30*time.Second, "started")
		job := descendants(t, p.Pid())
		if n := countComm(job, "sleep"); n != 2 {
			t.Fatalf("found %d sleep processes under the launcher (pid %d), want 2: %v", n, p.Pid(), job)
		}
		if alive := alive(job); len(alive) != len(job) {
			t.Fatalf("liveness check: %v of %v seen alive before the signal", alive, job)
		}
		sent := time.Now()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, err := p.Wait(5 * time.Second)
		if err != nil {
			t.Fatalf("launcher after SIGTERM: %v", err)
		}
		t.Logf("launcher exited %d, %v after SIGTERM", code, time.Since(sent).Round(time.Millisecond))
		if code != 128+int(syscall.SIGTERM) {
			t.Errorf("launcher exited %d after SIGTERM, want %d\nstderr:\n%s", code, 128+int(syscall.SIGTERM), p.Stderr())
		}
		if alive := waitGone(job, time.Second); len(alive) > 0 {
			t.Errorf("processes of the job outlived the launcher: %v", alive)
		}
	})
}

// proc is a process seen in /proc; start (clock ticks since boot) tells
// a surviving process from a new one that reused its pid.
type proc struct {
	pid   int
	comm  string
	start string
}

func (p proc) String() string { return fmt.Sprintf("%d(%s)", p.pid, p.comm) }

// descendants lists every process below pid, found through /proc's
// parent links.
func descendants(t *testing.T, pid int) []proc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := make(map[int]int)
	info := make(map[int]proc)
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ps, ppid, ok := readStat(p); ok {
			parent[p], info[p] = ppid, ps
		}
	}
	var out []proc
	for p := range info {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, info[p])
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b proc) int { return a.pid - b.pid })
	return out
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid ... starttime".
func readStat(pid int) (p proc, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return p, 0, false
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return p, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return p, 0, false
	}
	return proc{pid: pid, comm: s[open+1 : end], start: f[19]}, ppid, true
}

func countComm(ps []proc, comm string) int {
	n := 0
	for _, p := range ps {
		if p.comm == comm {
			n++
		}
	}
	return n
}

// alive returns the processes of ps that still run: same pid and start
// time (not a new process that reused the pid), not a zombie.
func alive(ps []proc) []proc {
	var out []proc
	for _, p := range ps {
		if now, _, ok := readStat(p.pid); ok && now.start == p.start && !isZombie(p.pid) {
			out = append(out, p)
		}
	}
	return out
}

// waitGone waits up to timeout for every process of ps to end and
// returns those still running.
func waitGone(ps []proc, timeout time.Duration) []proc {
	deadline := time.Now().Add(timeout)
	for {
		left := alive(ps)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	return end >= 0 && strings.HasPrefix(s[end+1:], " Z")
}

// TestStartupTime reports the wall time of "meshlaunch run -- true", from
// exec to exit, through the Ingress: the median of five runs, next to the
// same command line without the launcher (ip netns exec, tunWrapper,
// setpriv, true). It is reported, not asserted, and runs alone (not
// parallel) so that the other tests do not disturb it.
func TestStartupTime(t *testing.T) {
	c := newCluster(t)
	launcher := timeRuns(t, 5, func() (string, int) {
		_, stderr, code := c.run(t, launch{}, "true")
		return stderr, code
	})
	baseline := timeRuns(t, 5, func() (string, int) {
		_, stderr, code := c.Topo.Run(t, c.Topo.Node, launch{}.procOpts(), append(asNobody(t, launch{}), "true")...)
		return stderr, code
	})
	t.Logf("meshlaunch run -- true: median %v (min %v, max %v) over %d runs; without the launcher: median %v",
		median(launcher), launcher[0], launcher[len(launcher)-1], len(launcher), median(baseline))
}

// timeRuns runs f n times and returns the wall times, sorted; f returns
// the command's stderr and exit code, which must be 0.
func timeRuns(t *testing.T, n int, f func() (stderr string, code int)) []time.Duration {
	t.Helper()
	var times []time.Duration
	for range n {
		start := time.Now()
		stderr, code := f()
		if code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
		}
		times = append(times, time.Since(start).Round(100*time.Microsecond))
	}
	slices.Sort(times)
	return times
}

func median(sorted []time.Duration) time.Duration { return sorted[len(sorted)/2] }
