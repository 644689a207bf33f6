package nsload

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// workerProc drives a worker role (worker_test.go) running as the job of
// a launcher or in a namespace: commands go to its stdin, reports come
// from its stdout.
type workerProc struct {
	p       *nstest.Proc
	stdin   *os.File
	reports int // reports read so far
}

// startJobWorker runs a worker as the job of a launcher.
func (c *cluster) startJobWorker(t *testing.T) *workerProc {
	t.Helper()
	return startWorker(t, func(stdin *os.File) *nstest.Proc {
		return c.startLauncher(t, stdin, c.roleJob("worker")...)
	})
}

// startWorkerIn runs a worker in ns as nobody.
func (c *cluster) startWorkerIn(t *testing.T, ns string) *workerProc {
	t.Helper()
	return startWorker(t, func(stdin *os.File) *nstest.Proc {
		opts := nstest.ProcOpts{User: nobody, Env: roleEnvironment("worker"), Stdin: stdin}
		return c.Topo.Start(t, ns, opts, c.Roles)
	})
}

// startWorker starts a worker with start, which gets the read end of its
// stdin, and waits until it answers.
func startWorker(t *testing.T, start func(stdin *os.File) *nstest.Proc) *workerProc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() // the child has its own
	t.Cleanup(func() { w.Close() })
	wp := &workerProc{p: start(r), stdin: w}
	wp.do(t, 30*time.Second, "ping")
	return wp
}

// do sends one command and waits up to timeout for its report; a report
// with Err set, or a worker that exits or stays silent, fails t.
func (wp *workerProc) do(t *testing.T, timeout time.Duration, args ...string) report {
	t.Helper()
	if _, err := fmt.Fprintln(wp.stdin, strings.Join(args, " ")); err != nil {
		t.Fatalf("send %q to the worker: %v", args, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		if line, ok := wp.report(); ok {
			var rep report
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				t.Fatalf("worker report %q: %v", line, err)
			}
			if rep.Err != "" {
				t.Fatalf("worker: %q: %s", args, rep.Err)
			}
			return rep
		}
		select {
		case <-wp.p.Done():
			t.Fatalf("worker exited during %q\nstdout:\n%s\nstderr:\n%s", args, wp.p.Stdout(), wp.p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker did not answer %q within %v\nstderr:\n%s", args, timeout, wp.p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// report returns the next unread report line, if there is one.
func (wp *workerProc) report() (string, bool) {
	n := 0
	for line := range strings.Lines(wp.p.Stdout()) {
		rest, ok := strings.CutPrefix(line, reportPrefix)
		if !ok || !strings.HasSuffix(rest, "\n") {
			continue
		}
		if n == wp.reports {
			wp.reports++
			return strings.TrimSuffix(rest, "\n"), true
		}
		n++
	}
	return "", false
}

// String summarises a report for the log.
func (r report) String() string {
	return fmt.Sprintf("%s: %d ok, %d failed %v, slowest %.1f ms, %.0f ms in all, %d bytes checked, %d retries, errors %q",
		r.Cmd, r.OK, r.Failed, r.Outcomes, r.MaxMS, r.ElapsedMS, r.Bytes, r.Retries, r.Errors)
}
