package soak

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// opKind says what a successful operation adds to the tally.
type opKind int

const (
	opRequest  opKind = iota // one short request
	opTransfer               // one byte-checked transfer of the returned size
	opDNS                    // one DNS query
)

// worker repeats one operation, pause apart, for the whole soak.
type worker struct {
	what    string
	kind    opKind
	pause   time.Duration
	timeout time.Duration
	op      func(ctx context.Context) (bytes int64, err error)
}

// run repeats w.op until stop ends. An operation in flight then runs to
// its end, bounded by its own timeout, so that the end of the soak cuts
// no flow; only abort (the test giving up) cuts it.
func (w worker) run(stop, abort context.Context, tl *tally) {
	for stop.Err() == nil {
		start := time.Now()
		ctx, cancel := context.WithTimeout(abort, w.timeout)
		n, err := w.op(ctx)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%v after %v)", err, ctx.Err(), w.timeout)
		}
		cancel()
		w.record(tl, start, n, err)
		if err != nil {
			pause(stop, max(w.pause, failPause)) // a failing operation must not spin
			continue
		}
		pause(stop, w.pause)
	}
}

func (w worker) record(tl *tally, start time.Time, n int64, err error) {
	switch {
	case err != nil:
		tl.fail(w.what, start, err)
	case w.kind == opRequest:
		tl.requests.Add(1)
	case w.kind == opDNS:
		tl.dns.Add(1)
	default:
		tl.transferred(w.what, start, n)
	}
}

// pause waits d or until stop ends: it spaces operations out, it does not
// wait for anything.
func pause(stop context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-stop.Done():
	}
}

// runWorkers runs every worker on its own goroutine until stop ends and
// their last operations are over (see worker.run).
func runWorkers(stop, abort context.Context, tl *tally, ws []worker) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { w.run(stop, abort, tl) })
	}
	wg.Wait()
}

// newHTTPClient makes one connection per request (each is a new flow
// through the sidecar, and none outlives its request) with no proxy;
// each operation's context bounds its request.
func newHTTPClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// get GETs url and returns the response, which must be 200. A failure
// before the response wraps errNoResponse and says how far it got.
func get(ctx context.Context, client *http.Client, url string) (*http.Response, error) {
	ctx, steps := withPhases(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w: %w (%v)", url, errNoResponse, err, steps)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp, nil
}

// requestOp GETs url from an httpecho-style server, whose body is the
// client's address as the server saw it: its host must be wantHost.
func requestOp(client *http.Client, url, wantHost string) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		resp, err := get(ctx, client, url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		if err != nil {
			return 0, fmt.Errorf("GET %s: read body: %w", url, err)
		}
		ap, err := netip.ParseAddrPort(strings.TrimSpace(string(body)))
		if err != nil || ap.Addr().String() != wantHost {
			return 0, fmt.Errorf("GET %s: body %q, want the client address %s:PORT", url, body, wantHost)
		}
		return int64(len(body)), nil
	}
}

// downloadOp GETs base/bytes?n=N at transferRate and checks that every
// byte is the pattern's and that there are exactly n.
func downloadOp(client *http.Client, base string, n int64) func(context.Context) (int64, error) {
	url := fmt.Sprintf("%s/bytes?n=%d", base, n)
	return func(ctx context.Context) (int64, error) {
		resp, err := get(ctx, client, url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if err := nstest.VerifyPattern(newPacedReader(ctx, resp.Body, transferRate), n); err != nil {
			return 0, fmt.Errorf("GET %s: %w", url, err)
		}
		return n, nil
	}
}

// dnsOp looks name up with r; the answer must be exactly want.
func dnsOp(r *net.Resolver, name, want string) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		addrs, err := r.LookupHost(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("look up %s: %w", name, err)
		}
		if !slices.Equal(addrs, []string{want}) {
			return 0, fmt.Errorf("look up %s: %v, want [%s]", name, addrs, want)
		}
		return 0, nil
	}
}
