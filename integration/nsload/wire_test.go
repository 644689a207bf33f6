package nsload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
)

// The load protocol between the job (or a cluster client) and a
// sumserver: the client sends a header, then the body, a stream of Size
// pseudorandom bytes keyed by Seed, and half-closes.
//
//   - modeEcho: the server sends back every byte it reads and half-closes
//     after the client's EOF; the client compares what comes back with the
//     regenerated stream, byte by byte.
//   - modeUpload: the server answers the SHA-256 of the body and its
//     length; the client compares them with its own. Half the traffic of
//     an echo.
//   - modeDownload: the client sends no body; the server sends the
//     stream and half-closes, and the client compares it byte by byte.
const (
	modeEcho     byte = 'E'
	modeUpload   byte = 'U'
	modeDownload byte = 'D'
)

// magic starts every header, so that a stray connection (or a sidecar
// forwarding to the wrong place) is told from a corrupted stream.
const magic = "NSLD"

const headerLen = len(magic) + 1 + 8 + 8

// chunkLen is the size of one write and one comparison.
const chunkLen = 32 << 10

// header is what a client sends first.
type header struct {
	mode byte
	size uint64
	seed uint64
}

func (h header) marshal() []byte {
	b := make([]byte, 0, headerLen)
	b = append(b, magic...)
	b = append(b, h.mode)
	b = binary.BigEndian.AppendUint64(b, h.size)
	return binary.BigEndian.AppendUint64(b, h.seed)
}

func readHeader(r io.Reader) (header, error) {
	b := make([]byte, headerLen)
	if _, err := io.ReadFull(r, b); err != nil {
		return header{}, fmt.Errorf("read header: %w", err)
	}
	if string(b[:len(magic)]) != magic {
		return header{}, fmt.Errorf("bad header %q", b)
	}
	h := header{mode: b[len(magic)], size: binary.BigEndian.Uint64(b[len(magic)+1:]), seed: binary.BigEndian.Uint64(b[len(magic)+9:])}
	if h.mode != modeEcho && h.mode != modeUpload && h.mode != modeDownload {
		return header{}, fmt.Errorf("bad mode %q", h.mode)
	}
	return h, nil
}

// stream is the body keyed by seed: ChaCha8, so that a shifted,
// repeated or swapped chunk never matches by chance.
func stream(seed uint64) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], magic)
	return rand.NewChaCha8(key)
}

// writeBody writes n bytes of the stream keyed by seed, starting after
// skip bytes of it, to w.
func writeBody(w io.Writer, seed, skip, n uint64) error {
	src := stream(seed)
	if _, err := io.CopyN(io.Discard, src, int64(skip)); err != nil {
		return err
	}
	buf := make([]byte, chunkLen)
	for n > 0 {
		m := min(n, chunkLen)
		if _, err := io.ReadFull(src, buf[:m]); err != nil {
			return err
		}
		if _, err := w.Write(buf[:m]); err != nil {
			return fmt.Errorf("write at %d: %w", skip, err)
		}
		skip += m
		n -= m
	}
	return nil
}

// checker compares what it is written with the stream keyed by seed.
type checker struct {
	want io.Reader
	buf  []byte
	off  uint64
}

func newChecker(seed uint64) *checker {
	return &checker{want: stream(seed), buf: make([]byte, chunkLen)}
}

func (c *checker) Write(p []byte) (int, error) {
	for done := 0; done < len(p); {
		m := min(len(p)-done, len(c.buf))
		if _, err := io.ReadFull(c.want, c.buf[:m]); err != nil {
			return done, err
		}
		if i := mismatch(p[done:done+m], c.buf[:m]); i >= 0 {
			return done, fmt.Errorf("%w at byte %d", errCorrupt, c.off+uint64(i))
		}
		done += m
		c.off += uint64(m)
	}
	return len(p), nil
}

var errCorrupt = errors.New("corrupted stream")

// mismatch is the index of the first byte where a and b differ, or -1.
func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// bindConn makes ctx's deadline c's and closes c if ctx is cancelled;
// the returned function undoes the latter.
func bindConn(ctx context.Context, c net.Conn) (stop func() bool) {
	dl, _ := ctx.Deadline() // none: the zero time clears an earlier one
	_ = c.SetDeadline(dl)
	return context.AfterFunc(ctx, func() { c.Close() })
}

// closeWrite half-closes c.
func closeWrite(c net.Conn) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("%T cannot half-close", c)
	}
	return cw.CloseWrite()
}

// upload sends h's body (h.mode is modeUpload; the header went ahead)
// and checks the server's digest and count.
func upload(ctx context.Context, c net.Conn, h header) error {
	defer bindConn(ctx, c)()
	sum := sha256.New()
	if err := writeBody(io.MultiWriter(c, sum), h.seed, 0, h.size); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if err := closeWrite(c); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	var got [sha256.Size + 8]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return fmt.Errorf("upload: read the server's digest: %w", err)
	}
	if n := binary.BigEndian.Uint64(got[sha256.Size:]); n != h.size {
		return fmt.Errorf("upload: the server read %d bytes, want %d", n, h.size)
	}
	if !bytes.Equal(got[:sha256.Size], sum.Sum(nil)) {
		return fmt.Errorf("upload: %w: the server's SHA-256 differs", errCorrupt)
	}
	return nil
}

// download half-closes (the header went ahead) and checks the stream
// the server sends for h.
func download(ctx context.Context, c net.Conn, h header) error {
	defer bindConn(ctx, c)()
	if err := closeWrite(c); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	n, err := io.Copy(newChecker(h.seed), c)
	if err == nil && uint64(n) != h.size {
		err = fmt.Errorf("ended after %d of %d bytes", n, h.size)
	}
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

// echoRest sends h's body from byte sent on, half-closes, and checks the
// echo from byte got on (the header and any probe went ahead). The
// writer runs on its own goroutine, which echoRest waits for.
func echoRest(ctx context.Context, c net.Conn, h header, sent, got uint64) error {
	defer bindConn(ctx, c)()
	werr := make(chan error, 1)
	go func() {
		err := writeBody(c, h.seed, sent, h.size-sent)
		if err == nil {
			err = closeWrite(c)
		}
		werr <- err
	}()
	chk := newChecker(h.seed)
	if _, err := io.CopyN(io.Discard, chk.want, int64(got)); err != nil {
		return err
	}
	chk.off = got
	n, rerr := io.Copy(chk, c)
	if rerr == nil && got+uint64(n) != h.size {
		rerr = fmt.Errorf("echo ended after %d of %d bytes", got+uint64(n), h.size)
	}
	if rerr != nil {
		c.Close() // unblocks the writer
	}
	if err := errors.Join(rerr, <-werr); err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	return nil
}

// probeLen is how much of an echo body a probe sends and reads back: the
// proof that a connection reaches the server, not just a listener.
const probeLen = 16

// probe sends h's header and the first probeLen bytes of its body
// (h.mode is modeEcho) and waits for them to come back.
func probe(ctx context.Context, c net.Conn, h header) error {
	defer bindConn(ctx, c)()
	if _, err := c.Write(h.marshal()); err != nil {
		return fmt.Errorf("probe: write header: %w", err)
	}
	if err := writeBody(c, h.seed, 0, probeLen); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	chk := newChecker(h.seed)
	if _, err := io.CopyN(chk, c, probeLen); err != nil {
		return fmt.Errorf("probe: read back: %w", err)
	}
	return nil
}
