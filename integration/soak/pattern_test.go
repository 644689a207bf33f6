package soak

import (
	"context"
	"io"
	"time"
)

// patternReader yields nstest.Pattern's bytes (byte i is i mod 251)
// without end, so that nstest.VerifyPattern checks what it served.
type patternReader struct{ off int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

// pacedReader passes r through at no more than rate bytes per second: it
// rate-limits a transfer, it does not wait for anything. ctx ends the
// pacing wait (the read that follows fails on the closed connection).
type pacedReader struct {
	ctx   context.Context
	r     io.Reader
	rate  int64
	start time.Time
	n     int64
}

func newPacedReader(ctx context.Context, r io.Reader, rate int64) *pacedReader {
	return &pacedReader{ctx: ctx, r: r, rate: rate, start: time.Now()}
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if err := p.wait(); err != nil {
		return 0, err
	}
	n, err := p.r.Read(b[:min(len(b), 32<<10)])
	p.n += int64(n)
	return n, err
}

// wait sleeps until the bytes so far are within the rate.
func (p *pacedReader) wait() error {
	due := p.start.Add(time.Duration(p.n * int64(time.Second) / p.rate))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}
