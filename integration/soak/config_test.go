package soak

import (
	"os"
	"testing"
	"time"
)

// soakEnv holds the soak's duration (a Go duration: "2m", "10m"); the
// soak is skipped without it.
const soakEnv = "MESHLAUNCH_SOAK"

// minDuration leaves room for the warm-up and at least one kill of the
// websocket in the middle of traffic.
const minDuration = time.Minute

// Pace of the run. Kills every 45 s alternate a reset of every connection
// at the fault relay with a restart of nginx. The launcher resets its
// reconnect backoff after 30 s of stable connection (wsproxy); kills 30 s
// apart never let it, so its delays climbed to seconds and the soak
// measured a flapping carrier instead of periodic cuts.
const (
	killEvery     = 45 * time.Second
	sampleEvery   = 10 * time.Second
	progressEvery = 30 * time.Second
	// settleMax bounds the wait for the sidecar to come back to its
	// start figures after the jobs have gone: above the 60 s UDP idle
	// timeout, after which every egress UDP session is reaped, and above
	// the Go runtime's 2-minute forced GC, the only collection an idle
	// process gets, so freed buffers are collected and their pages can
	// be returned.
	settleMax = 150 * time.Second
	// drainMax bounds how long in-flight operations may run after the
	// duration has passed: the longest operation's timeout plus slack.
	drainMax = opTimeoutLong + time.Minute
	// reconnectWindow is how long after a kill the launcher is allowed to
	// take to be back: its first retry comes after up to 250 ms (full
	// jitter), nginx takes about a second to restart, and the test
	// matrix asks traffic to resume within about 3 s of the carrier.
	reconnectWindow = 5 * time.Second
)

// Traffic mix. Transfers are paced so that the soak measures staying
// power, not throughput, on a small shared machine: 32 MiB at 4 MiB/s is
// an 8 s transfer, long enough that every kill lands in one.
const (
	transferBytes = 32 << 20
	ingressBytes  = 16 << 20
	transferRate  = 4 << 20 // bytes per second, per transfer
	requestPause  = 100 * time.Millisecond
	dnsPause      = 200 * time.Millisecond
	failPause     = time.Second // after a failed operation
	// opTimeout bounds a short request or a DNS query, opTimeoutLong a
	// transfer: far above what a carrier cut costs (reconnect within
	// seconds, TCP retransmission), so a timeout is a real failure.
	opTimeout     = 60 * time.Second
	opTimeoutLong = 5 * time.Minute
)

// Margins of the end figures over the start figures. The start sample is
// taken with the job connected and traffic in flight, the end sample with
// no session at all, so a sidecar that cleans up ends below its start; the
// margins absorb runtime noise (the Go runtime's and gVisor's helper
// goroutines, a metrics scrape's own connection, a descriptor the runtime
// opens lazily) while a leak of one goroutine or descriptor per flow or
// per reconnect, thousands over a soak, cannot hide in them. RSS gets
// half again plus 8 MiB because Go returns freed heap to the system only
// gradually (the background scavenger), and a peak of paced transfers
// leaves pages behind for minutes.
const (
	goroutineMargin = 20
	fdMargin        = 10
	rssFactor       = 1.5
	rssSlack        = 8 << 20
)

// warmUp is the traffic before the start sample: a fifth of the run,
// between 20 s and 60 s. The sidecar's RSS climbs to a plateau over the
// first minute or two of traffic (measured: 58 MiB at 20 s, 91 MiB from
// 2 min on, flat to the end of a 5-minute run); a later start sample
// compares the end with that plateau rather than with the climb, and a
// leak still has the rest of the run to show.
func warmUp(d time.Duration) time.Duration { return min(max(d/5, 20*time.Second), time.Minute) }

// soakDuration returns the duration from MESHLAUNCH_SOAK; it skips t
// when the variable is unset and fails it when the value is not a usable
// duration or the test's -timeout cannot fit the run.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v, ok := os.LookupEnv(soakEnv)
	if !ok || v == "" {
		t.Skipf("the soak runs only with %s set to a duration (make soak DURATION=10m)", soakEnv)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q is not a Go duration (want e.g. 2m or 10m): %v", soakEnv, v, err)
	}
	if d < minDuration {
		t.Fatalf("%s=%v is too short: the soak needs at least %v (warm-up %v, then kills every %v)",
			soakEnv, d, minDuration, warmUp(minDuration), killEvery)
	}
	// Setup, the last paced transfers and the settle take a minute or
	// two; a run that needs drainMax or settleMax in full has failed.
	need := d + 3*time.Minute
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < need {
		t.Fatalf("%s=%s needs at least %v but the test times out in %v: pass go test -timeout (make soak uses 3h)",
			soakEnv, v, need, time.Until(deadline).Round(time.Second))
	}
	return d
}
