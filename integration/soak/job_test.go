package soak

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// Where the job's traffic goes and comes from.
const (
	// webBase is the Service by its short name: the job's resolv.conf
	// (the pod's search path, through the in-tunnel DNS) completes it.
	webBase = "http://web"
	webName = "web"
	// echoAddr is tcpecho on the Service host, for uploads.
	echoAddr = nstest.ServiceIP + ":7007"
	// jobListen is the job's server on the port the sidecar exposes.
	jobListen = "0.0.0.0:" + nstest.ExposedTCP
	// quitTimeout bounds the job's wait for the test's /quit once its own
	// operations are over.
	quitTimeout = 10 * time.Minute
)

// runJob is a launcher's job: it runs the job's side of the traffic mix
// for -duration and prints its report (one JSON event per line). The
// main job (at the pod IP) also serves the exposed port and exits once the
// test asks it to (/quit); an extra job (-extra), whose launcher does not
// hold the pod IP and so gets no exposed port, runs a lighter mix and
// exits once its last operation is over.
func runJob(args []string) error {
	fs := flag.NewFlagSet("job", flag.ContinueOnError)
	d := fs.Duration("duration", 0, "how long to start new operations")
	extra := fs.Bool("extra", false, "an extra launcher's job: no server, the lighter mix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *d <= 0 || fs.NArg() > 0 {
		return fmt.Errorf("usage: job -duration D [-extra] (got %q)", args)
	}
	out := &printer{w: os.Stdout}
	var srv *jobServer
	if !*extra {
		var err error
		if srv, err = startJobServer(jobListen); err != nil {
			return err
		}
	}
	tl := &tally{emit: out.print}
	out.print(event{Kind: evReady})
	runJobTraffic(*d, tl, out, jobWorkers(*extra))
	c := tl.snapshot()
	out.print(event{Kind: evFinal, Counts: &c})
	if srv == nil {
		return nil
	}
	return srv.waitQuit(quitTimeout)
}

// runJobTraffic runs ws for d, printing running totals.
func runJobTraffic(d time.Duration, tl *tally, out *printer, ws []worker) {
	stop, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	reports, stopReports := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { printStats(reports, tl, out) })
	runWorkers(stop, context.Background(), tl, ws)
	stopReports()
	wg.Wait()
}

// jobWorkers: two short-request loops and a DNS loop against the Service
// by name, two downloads from it and one upload through an echo server,
// all byte-checked. An extra job runs one loop of each kind (a request, a
// download, an upload, DNS): with three launchers the full mix in each
// would triple the paced transfers on a small shared machine, and the
// soak measures staying power, not throughput.
func jobWorkers(extra bool) []worker {
	var d net.Dialer
	client := newHTTPClient(d.DialContext)
	request := worker{what: "request " + webBase, kind: opRequest, pause: requestPause, timeout: opTimeout,
		op: requestOp(client, webBase+"/", nstest.PodIP)} // every job's egress leaves from the pod IP
	download := worker{what: "download " + webBase, kind: opTransfer, timeout: opTimeoutLong,
		op: downloadOp(client, webBase, transferBytes)}
	upload := worker{what: "upload " + echoAddr, kind: opTransfer, timeout: opTimeoutLong,
		op: echoOp(d.DialContext, echoAddr, transferBytes)}
	dns := worker{what: "dns " + webName, kind: opDNS, pause: dnsPause, timeout: opTimeout,
		op: dnsOp(net.DefaultResolver, webName, nstest.ServiceIP)}
	if extra {
		return []worker{request, download, upload, dns}
	}
	return []worker{request, request, download, download, upload, dns}
}

// printStats prints the running totals every sampleEvery until ctx ends.
func printStats(ctx context.Context, tl *tally, out *printer) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c := tl.snapshot()
			out.print(event{Kind: evStats, Counts: &c})
		}
	}
}

// printer writes events as JSON lines; safe for concurrent use.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) print(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := json.NewEncoder(p.w).Encode(e); err != nil {
		fmt.Fprintf(os.Stderr, "soak job: report: %v\n", err)
	}
}
