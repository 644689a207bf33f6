package nsfaults

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// roles are this package's helpers, run by a copy of the test binary with
// $NSFAULTS_ROLE set (as jobs, for example); each gets the arguments after
// argv[0].
var roles = map[string]func(args []string) error{
	"interactive": runInteractive, // ADDR DURATION INTERVAL STALL: request/response over one connection to an echo server
}

// runRole runs a role and returns the process exit status.
func runRole(role string, args []string) int {
	fn, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "nsfaults: unknown role %q\n", role)
		return 2
	}
	if err := fn(args); err != nil {
		fmt.Fprintf(os.Stderr, "nsfaults: role %s: %v\n", role, err)
		return 1
	}
	return 0
}

// runInteractive is an interactive flow: over one TCP connection to an
// echo server at ADDR it sends a 64-byte request every INTERVAL (or as
// soon as the last answer came, if that was later) for DURATION and waits
// for each echo, at most STALL. It prints one line,
//
//	interactive rounds=N p50_ms=P max_ms=M rtts_ms=R1,R2,...
//
// and fails on a wrong echo or an answer later than STALL.
func runInteractive(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("usage: interactive ADDR DURATION INTERVAL STALL (got %q)", args)
	}
	var d [3]time.Duration
	for i, s := range args[1:] {
		var err error
		if d[i], err = time.ParseDuration(s); err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
	}
	c, err := net.DialTimeout("tcp", args[0], 10*time.Second)
	if err != nil {
		return fmt.Errorf("dial %s: %w", args[0], err)
	}
	defer c.Close()
	rtts, err := requestLoop(c, d[0], d[1], d[2])
	if err != nil {
		return err
	}
	ms := make([]string, len(rtts))
	for i, d := range rtts {
		ms[i] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	slices.Sort(rtts)
	fmt.Printf("interactive rounds=%d p50_ms=%d max_ms=%d rtts_ms=%s\n", len(rtts),
		rtts[len(rtts)/2].Milliseconds(), rtts[len(rtts)-1].Milliseconds(), strings.Join(ms, ","))
	return nil
}

// requestLoop runs the request/response rounds and returns their round
// trip times.
func requestLoop(c net.Conn, duration, interval, stall time.Duration) ([]time.Duration, error) {
	req, resp := make([]byte, 64), make([]byte, 64)
	var rtts []time.Duration
	end := time.Now().Add(duration)
	for seq := uint64(0); time.Now().Before(end); seq++ {
		binary.BigEndian.PutUint64(req, seq)
		start := time.Now()
		_ = c.SetDeadline(start.Add(stall))
		if _, err := c.Write(req); err != nil {
			return nil, fmt.Errorf("request %d: %w", seq, err)
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			return nil, fmt.Errorf("answer %d (waited %v): %w", seq, time.Since(start), err)
		}
		if !bytes.Equal(req, resp) {
			return nil, fmt.Errorf("answer %d differs from the request", seq)
		}
		rtts = append(rtts, time.Since(start))
		time.Sleep(time.Until(start.Add(interval)))
	}
	if len(rtts) == 0 {
		return nil, fmt.Errorf("no round within %v", duration)
	}
	return rtts, nil
}
