package faultrelay

import (
	"net"
	"sync"
	"time"
)

const (
	// bufSize is the largest read of an unthrottled direction.
	bufSize = 64 << 10
	// queueChunks bounds the chunks read but not yet written per
	// direction of a connection (at most 4 MiB): the delay line of
	// Shape.Latency, and where a slow receiver pushes back.
	queueChunks = 64
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// chunk is what one read brought: data due for writing at due, or the
// end of the direction (end is io.EOF for a FIN).
type chunk struct {
	buf  *[]byte
	data []byte
	due  time.Time
	end  error
}

// pipe relays src to dst in direction dir until src ends: a reader that
// throttles and timestamps chunks, and a writer that delays and slices
// them.
func (r *Relay) pipe(p *pair, dir Direction, dst, src net.Conn) {
	l := &r.link[dir]
	q := make(chan chunk, queueChunks)
	var wg sync.WaitGroup
	wg.Go(func() { p.deliver(l, dst, src, q) })
	p.receive(l, src, q)
	wg.Wait()
}

// receive reads src into q until src ends or the pair is reset; it
// closes q. Once the pair is silent, what it reads is discarded.
func (p *pair) receive(l *link, src net.Conn, q chan<- chunk) {
	defer close(q)
	for {
		buf := bufPool.Get().(*[]byte)
		n, err := src.Read((*buf)[:readSize(l.shape.Load())])
		s := l.shape.Load() // what applies now, after a read that may have waited long
		if n > 0 && !p.silent.Load() {
			if s.Rate > 0 && l.bucket.take(p.ctx, n, s.Rate) != nil {
				return
			}
			if !p.send(q, chunk{buf: buf, data: (*buf)[:n], due: time.Now().Add(s.Latency)}) {
				return
			}
		} else {
			bufPool.Put(buf)
		}
		if err != nil {
			p.send(q, chunk{end: err})
			return
		}
	}
}

func readSize(s *Shape) int {
	if s.Rate > 0 {
		return min(burstBytes(s.Rate), bufSize)
	}
	return bufSize
}

func (p *pair) send(q chan<- chunk, c chunk) bool {
	select {
	case q <- c:
		return true
	case <-p.ctx.Done():
		if c.buf != nil {
			bufPool.Put(c.buf)
		}
		return false
	}
}

// deliver writes the chunks of q to dst when they are due, unless the
// pair has gone silent meanwhile. After a failed write it closes src, so
// that the reader stops, and drains q.
func (p *pair) deliver(l *link, dst, src net.Conn, q <-chan chunk) {
	broken := false
	for c := range q {
		switch {
		case broken || p.silent.Load():
		case c.end != nil:
			p.endWrite(dst, c.end)
		case sleepUntil(p.ctx, c.due) != nil || !p.silent.Load() && l.write(dst, c.data) != nil:
			broken = true
			src.Close()
		}
		if c.buf != nil {
			bufPool.Put(c.buf)
		}
	}
}

// write writes b to dst, cut into slices if the shape says so.
func (l *link) write(dst net.Conn, b []byte) error {
	slice := l.shape.Load().Slice
	for len(b) > 0 {
		n := len(b)
		if slice > 0 {
			n = min(n, slice)
		}
		l.bytes.Add(int64(n)) // counted first: the receiver may see them before Write returns
		l.writes.Add(1)
		if _, err := dst.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
