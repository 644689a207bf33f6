package nsload

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// reportPrefix starts every line a worker answers with on stdout.
const reportPrefix = "nsload-report "

// report is a worker's answer to one command.
type report struct {
	Cmd       string         `json:"cmd"`
	OK        int            `json:"ok"`
	Failed    int            `json:"failed"`
	Outcomes  map[string]int `json:"outcomes,omitempty"` // of every attempt: ok, refused, reset, eof, timeout, corrupt, other
	Errors    []string       `json:"errors,omitempty"`   // the first few
	MaxMS     float64        `json:"max_ms"`             // the slowest attempt
	ElapsedMS float64        `json:"elapsed_ms"`         // the whole command
	Bytes     int64          `json:"bytes"`              // body bytes checked
	Retries   int            `json:"retries"`
	Err       string         `json:"err,omitempty"` // the command itself failed
}

const maxErrors = 5

// tally collects the outcomes of a command's attempts; safe for
// concurrent use.
type tally struct {
	mu sync.Mutex
	r  report
}

func newTally(cmd string) *tally { return &tally{r: report{Cmd: cmd, Outcomes: map[string]int{}}} }

// add records one attempt that took d; err nil is a success.
func (t *tally) add(err error, d time.Duration, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.Outcomes[outcome(err)]++
	t.r.MaxMS = max(t.r.MaxMS, ms(d))
	if err == nil {
		t.r.OK++
		t.r.Bytes += bytes
		return
	}
	t.r.Failed++
	if len(t.r.Errors) < maxErrors {
		t.r.Errors = append(t.r.Errors, err.Error())
	}
}

func (t *tally) retried() {
	t.mu.Lock()
	t.r.Retries++
	t.mu.Unlock()
}

func (t *tally) done(start time.Time) report {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.ElapsedMS = ms(time.Since(start))
	return t.r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// runWorker reads commands from stdin, one per line, runs each to its
// end and answers it with one report line on stdout (reportPrefix and
// JSON). It keeps groups of open connections between commands and
// closes them when stdin ends. The commands are worker's methods.
func runWorker(args []string) error {
	if len(args) != 0 {
		return usage("worker (commands on stdin)", args)
	}
	w := &worker{groups: map[string][]*loadConn{}, seed: uint64(time.Now().UnixNano())}
	defer w.closeAll()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		rep := w.do(f[0], f[1:])
		b, err := json.Marshal(rep)
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		fmt.Printf("%s%s\n", reportPrefix, b)
	}
	return sc.Err()
}

// worker is the state of runWorker.
type worker struct {
	groups map[string][]*loadConn
	seed   uint64 // the next connection's key
}

// do runs one command; a malformed one is a report with Err set.
func (w *worker) do(cmd string, args []string) report {
	a := argReader{args: args}
	var rep report
	switch cmd {
	case "ping":
		rep = report{OK: 1}
	case "open": // GROUP ADDR N DIALCONC MODE SIZE TIMEOUT
		group, addr, n, conc, mode, size, timeout := a.str(), a.str(), a.int(), a.int(), a.str(), a.int(), a.dur()
		rep = a.or(func() report { return w.open(group, addr, n, conc, mode, uint64(size), timeout) })
	case "try": // ADDR N TIMEOUT
		addr, n, timeout := a.str(), a.int(), a.dur()
		rep = a.or(func() report { return try(netDial, addr, n, timeout) })
	case "transfer": // GROUP TIMEOUT
		group, timeout := a.str(), a.dur()
		rep = a.or(func() report { return w.transfer(group, timeout) })
	case "close": // GROUP
		group := a.str()
		rep = a.or(func() report { return w.closeGroup(group) })
	case "dns": // SERVER NAME WANT N CONC TRIES TRYTIMEOUT
		server, name, want, n, conc, tries, tryTimeout := a.str(), a.str(), a.str(), a.int(), a.int(), a.int(), a.dur()
		rep = a.or(func() report { return dnsStorm(server, name, want, n, conc, tries, tryTimeout) })
	default:
		rep = report{Err: "unknown command"}
	}
	rep.Cmd = cmd
	return rep
}

func (w *worker) nextSeed() uint64 { w.seed++; return w.seed }

func (w *worker) closeAll() {
	for g := range w.groups {
		w.closeGroup(g)
	}
}

// argReader takes a command's arguments in order; the first problem
// sticks and makes or report it.
type argReader struct {
	args []string
	err  error
}

func (a *argReader) str() string {
	if len(a.args) == 0 {
		a.fail(fmt.Errorf("too few arguments"))
		return ""
	}
	s := a.args[0]
	a.args = a.args[1:]
	return s
}

func (a *argReader) int() int {
	n, err := strconv.Atoi(a.str())
	if err != nil {
		a.fail(err)
	}
	return n
}

func (a *argReader) dur() time.Duration {
	d, err := time.ParseDuration(a.str())
	if err != nil {
		a.fail(err)
	}
	return d
}

func (a *argReader) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// or runs f if every argument parsed and none is left over.
func (a *argReader) or(f func() report) report {
	if a.err == nil && len(a.args) > 0 {
		a.err = fmt.Errorf("extra arguments %q", a.args)
	}
	if a.err != nil {
		return report{Err: a.err.Error()}
	}
	return f()
}

// forEach runs f(0) … f(n-1), at most conc at once, and waits for all.
func forEach(n, conc int, f func(i int)) {
	sem := make(chan struct{}, max(conc, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// withTimeout is a context for one attempt.
func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
