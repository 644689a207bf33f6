package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// jobServer is the job's HTTP server on the exposed port: "/" answers the
// client's address, "/bytes?n=N" the pattern's first N bytes, "/quit"
// ends the job.
type jobServer struct {
	srv  *http.Server
	quit chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	err  error // Serve's, valid after wg.Wait
}

// errNoQuit: the test never asked the job to end.
var errNoQuit = errors.New("no /quit from the test")

func startJobServer(addr string) (*jobServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	s := &jobServer{quit: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.RemoteAddr) })
	mux.HandleFunc("/bytes", serveBytes)
	mux.HandleFunc("/quit", func(w http.ResponseWriter, _ *http.Request) {
		s.once.Do(func() { close(s.quit) })
		_, _ = io.WriteString(w, "bye\n")
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Go(func() { s.err = s.srv.Serve(ln) })
	return s, nil
}

// waitQuit waits for /quit (or timeout), then shuts the server down,
// letting requests in flight finish.
func (s *jobServer) waitQuit(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case <-s.quit:
	case <-timer.C:
		err = fmt.Errorf("%w within %v", errNoQuit, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeoutLong)
	defer cancel()
	if serr := s.srv.Shutdown(ctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("shut the server down: %w", serr))
	}
	s.wg.Wait()
	if !errors.Is(s.err, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("serve: %w", s.err))
	}
	return err
}

func serveBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 {
		http.Error(w, "want /bytes?n=N", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	_, _ = io.Copy(w, io.LimitReader(&patternReader{}, n))
}
