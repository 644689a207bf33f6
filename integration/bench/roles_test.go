package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// roles are this package's helpers, run by a copy of the test binary with
// $BENCH_ROLE set; each gets the arguments after argv[0].
var roles = map[string]func(args []string) error{
	"agent":      runAgent,      // SOCKET: run commands as the job (agentRequest)
	"pingserver": runPingServer, // ADDR: answer each byte with one byte
	"pingclient": runPingClient, // ADDR N WARMUP: N timed 1-byte round trips, JSON
	"sink":       runSink,       // ADDR: accept and hold connections, read and discard
	"hold":       runHold,       // ADDR N: open N connections, report, hold until SIGTERM
	"timeit":     runTimeit,     // N -- ARGV...: run ARGV N times, wall times as JSON
}

// runRole runs a role and returns the process exit status.
func runRole(role string, args []string) int {
	fn, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown role %q\n", role)
		return 2
	}
	if err := fn(args); err != nil {
		fmt.Fprintf(os.Stderr, "bench: role %s: %v\n", role, err)
		return 1
	}
	return 0
}

// childEnv is the environment of a process a role starts: its own minus
// $BENCH_ROLE, plus extra.
func childEnv(extra []string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, roleEnv+"=") })
	return append(env, extra...)
}

// raiseNoFile sets the soft limit of open files to the hard limit and
// returns both, and the soft limit it found. (The Go runtime already does
// this at start-up; doing it again makes the role's report explicit.)
func raiseNoFile() (softBefore, soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, 0, fmt.Errorf("getrlimit: %w", err)
	}
	softBefore = lim.Cur
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return softBefore, softBefore, lim.Max, fmt.Errorf("setrlimit: %w", err)
	}
	return softBefore, lim.Cur, lim.Max, nil
}

// agentRequest is one line of JSON to the agent; agentResponse its answer.
//   - "run": run Argv (with Env added) to completion or TimeoutMS.
//   - "start": start Argv in the background, output in OutPath.
//   - "stop": SIGTERM the background process Pid, SIGKILL after 3 s.
type agentRequest struct {
	Op        string   `json:"op"`
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"`
	TimeoutMS int      `json:"timeout_ms,omitempty"`
	Pid       int      `json:"pid,omitempty"`
}

type agentResponse struct {
	Code    int    `json:"code"`
	Stdout  string `json:"stdout,omitempty"`
	Stderr  string `json:"stderr,omitempty"`
	Pid     int    `json:"pid,omitempty"`
	OutPath string `json:"out_path,omitempty"`
	Err     string `json:"err,omitempty"`
}

// agent is the job of the long-lived "meshlaunch run": it runs the
// benchmark's clients and servers as the job itself (the job's uid and
// namespaces, children of the job), on request over a Unix socket in a
// directory the test shares with it.
type agent struct {
	dir string
	mu  sync.Mutex
	bg  map[int]*exec.Cmd
	n   int
}

func runAgent(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: agent SOCKET (got %q)", args)
	}
	a := &agent{dir: filepath.Dir(args[0]), bg: map[int]*exec.Cmd{}}
	ln, err := net.Listen("unix", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("agent listening on %s\n", args[0])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			a.stopAll()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go a.serve(c)
	}
}

func (a *agent) serve(c net.Conn) {
	defer c.Close()
	var req agentRequest
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		_ = json.NewEncoder(c).Encode(agentResponse{Code: -1, Err: "bad request: " + err.Error()})
		return
	}
	var resp agentResponse
	switch req.Op {
	case "run":
		resp = a.run(req)
	case "start":
		resp = a.start(req)
	case "stop":
		resp = a.stop(req.Pid)
	default:
		resp = agentResponse{Code: -1, Err: "unknown op " + strconv.Quote(req.Op)}
	}
	_ = json.NewEncoder(c).Encode(resp)
}

func (a *agent) run(req agentRequest) agentResponse {
	if len(req.Argv) == 0 {
		return agentResponse{Code: -1, Err: "empty argv"}
	}
	timeout := time.Duration(max(req.TimeoutMS, 1000)) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Env = childEnv(req.Env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	resp := agentResponse{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		resp.Code, resp.Err = -1, fmt.Sprintf("still running after %v, killed", timeout)
	case err == nil:
	case errors.As(err, &exitErr):
		resp.Code = exitErr.ExitCode()
	default:
		resp.Code, resp.Err = -1, err.Error()
	}
	return resp
}

func (a *agent) start(req agentRequest) agentResponse {
	if len(req.Argv) == 0 {
		return agentResponse{Code: -1, Err: "empty argv"}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	outPath := filepath.Join(a.dir, fmt.Sprintf("bg-%d.out", a.n))
	out, err := os.Create(outPath)
	if err != nil {
		return agentResponse{Code: -1, Err: err.Error()}
	}
	defer out.Close()
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = childEnv(req.Env)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return agentResponse{Code: -1, Err: err.Error()}
	}
	a.bg[cmd.Process.Pid] = cmd
	return agentResponse{Pid: cmd.Process.Pid, OutPath: outPath}
}

func (a *agent) stop(pid int) agentResponse {
	a.mu.Lock()
	cmd, ok := a.bg[pid]
	delete(a.bg, pid)
	a.mu.Unlock()
	if !ok {
		return agentResponse{Code: -1, Err: fmt.Sprintf("no background process %d", pid)}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return agentResponse{Code: cmd.ProcessState.ExitCode()}
}

func (a *agent) stopAll() {
	a.mu.Lock()
	pids := make([]int, 0, len(a.bg))
	for pid := range a.bg {
		pids = append(pids, pid)
	}
	a.mu.Unlock()
	for _, pid := range pids {
		a.stop(pid)
	}
}

// runPingServer answers every byte it reads with one byte.
func runPingServer(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: pingserver ADDR (got %q)", args)
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("pingserver listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		go func() {
			defer c.Close()
			var b [1]byte
			for {
				if _, err := io.ReadFull(c, b[:]); err != nil {
					return
				}
				if _, err := c.Write(b[:]); err != nil {
					return
				}
			}
		}()
	}
}

// pingResult is pingclient's report, in microseconds.
type pingResult struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	Mean float64 `json:"mean_us"`
}

// runPingClient connects (retrying for 10 s), sends WARMUP untimed and
// then N timed 1-byte requests, each waiting for its 1-byte answer, on
// one connection with TCP_NODELAY (Go's default), and prints pingResult.
func runPingClient(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: pingclient ADDR N WARMUP (got %q)", args)
	}
	n, err1 := strconv.Atoi(args[1])
	warm, err2 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2); err != nil || n < 1 || warm < 0 {
		return fmt.Errorf("usage: pingclient ADDR N WARMUP: %v", err)
	}
	var c net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if c, err = net.DialTimeout("tcp", args[0], 3*time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dial: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(60 * time.Second)); err != nil {
		return err
	}
	var b [1]byte
	rtt := make([]time.Duration, 0, n)
	for i := range warm + n {
		start := time.Now()
		if _, err := c.Write(b[:]); err != nil {
			return fmt.Errorf("write after %d round trips: %w", i, err)
		}
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return fmt.Errorf("read after %d round trips: %w", i, err)
		}
		if i >= warm {
			rtt = append(rtt, time.Since(start))
		}
	}
	slices.Sort(rtt)
	var sum time.Duration
	for _, d := range rtt {
		sum += d
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	res := pingResult{N: n, P50: us(rtt[n/2]), P99: us(rtt[min(n-1, n*99/100)]), Mean: us(sum / time.Duration(n))}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// runSink accepts connections and reads each until EOF.
func runSink(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: sink ADDR (got %q)", args)
	}
	if _, _, _, err := raiseNoFile(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("sink listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		go func() {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}()
	}
}

// holdReport is hold's first line of output.
type holdReport struct {
	SoftBefore uint64  `json:"nofile_soft_before"`
	Soft       uint64  `json:"nofile_soft"`
	Hard       uint64  `json:"nofile_hard"`
	Held       int     `json:"held"`
	Seconds    float64 `json:"seconds"`
}

// runHold opens N TCP connections to ADDR, 16 dials at a time (the
// sidecar limits dials in progress per peer), each retried on failure,
// prints holdReport and keeps them open and idle until SIGTERM.
func runHold(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: hold ADDR N (got %q)", args)
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		return fmt.Errorf("usage: hold ADDR N: bad N %q", args[1])
	}
	softBefore, soft, hard, err := raiseNoFile()
	if err != nil {
		return err
	}
	if soft < uint64(n)+64 {
		return fmt.Errorf("open-file limit %d (hard %d) is below %d connections", soft, hard, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	start := time.Now()
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for try := 0; ; try++ {
				c, err := net.DialTimeout("tcp", args[0], 10*time.Second)
				if err == nil {
					conns[i] = c
					return
				}
				if try == 4 {
					errs[i] = err
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("open %d connections: %w", n, err)
	}
	rep := holdReport{SoftBefore: softBefore, Soft: soft, Hard: hard, Held: n, Seconds: time.Since(start).Seconds()}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// runTimeit runs ARGV N times in a row and prints each wall time (from
// just before the fork to the reaping of the process) in milliseconds.
func runTimeit(args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return fmt.Errorf("usage: timeit N -- ARGV... (got %q)", args)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return fmt.Errorf("usage: timeit N -- ARGV...: bad N %q", args[0])
	}
	argv := args[2:]
	ms := make([]float64, 0, n)
	for i := range n {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = childEnv(nil)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		d := time.Since(start)
		if err != nil {
			return fmt.Errorf("run %d of %q: %w\n%s", i+1, argv, err, stderr.String())
		}
		ms = append(ms, float64(d)/float64(time.Millisecond))
	}
	return json.NewEncoder(os.Stdout).Encode(map[string][]float64{"ms": ms})
}
