package nstest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// UpgradeProtocol is the Upgrade token httpecho answers with 101 Switching
// Protocols, after which it echoes raw bytes: the same path through a
// proxy as a websocket, without a websocket library.
const UpgradeProtocol = "nstest-echo"

// maxPatternBytes bounds /bytes?n=N.
const maxPatternBytes = 1 << 32

// runHTTPEcho serves on ADDR: any path answers the client's address
// (r.RemoteAddr) as the body, /bytes?n=N answers Pattern(N), and a request
// with "Upgrade: nstest-echo" becomes a raw echo connection.
func runHTTPEcho(args []string) error {
	if len(args) != 1 {
		return usage("httpecho ADDR", args)
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("httpecho listening on %s\n", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/", serveRemoteAddr)
	mux.HandleFunc("/bytes", serveBytes)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}

func serveRemoteAddr(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Upgrade"), UpgradeProtocol) {
		serveUpgradeEcho(w)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, r.RemoteAddr)
}

func serveBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 || n > maxPatternBytes {
		http.Error(w, "want /bytes?n=N with 0 <= N <= 2^32", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	_, _ = io.Copy(w, io.LimitReader(&patternReader{}, n))
}

// serveUpgradeEcho answers 101 and echoes every byte until the client
// closes its side.
func serveUpgradeEcho(w http.ResponseWriter) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot hijack: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	_, _ = fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", UpgradeProtocol)
	if rw.Flush() != nil {
		return
	}
	_, _ = io.Copy(conn, rw.Reader) // rw.Reader holds bytes already buffered
}

// Pattern returns the n bytes that httpecho's /bytes?n=N serves: byte i is
// i mod 251, a period that no power-of-two buffer size lines up with.
func Pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// VerifyPattern reads r to the end and reports whether it is exactly
// Pattern(n), naming the first offset that differs.
func VerifyPattern(r io.Reader, n int64) error {
	br := bufio.NewReaderSize(r, 64<<10)
	want := patternReader{}
	var off int64
	buf, exp := make([]byte, 32<<10), make([]byte, 32<<10)
	for {
		k, err := br.Read(buf)
		if k > 0 {
			want.off = off
			_, _ = want.Read(exp[:k])
			if i := firstDiff(buf[:k], exp[:k]); i >= 0 {
				return fmt.Errorf("byte %d is %#x, want %#x", off+int64(i), buf[i], exp[i])
			}
			off += int64(k)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read at byte %d: %w", off, err)
		}
	}
	if off != n {
		return fmt.Errorf("got %d bytes, want %d", off, n)
	}
	return nil
}

func firstDiff(a, b []byte) int {
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

// patternReader yields Pattern without end, starting at offset off.
type patternReader struct{ off int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}
