package tunnel

import (
	"context"
	"fmt"
	"io"
	"net/url"
)

// Stdio connects in and out to a stream to hostport on the pod's side, for
// ssh's ProxyCommand ("meshlaunch tunnel --stdio %h:%p"). It returns nil
// once both directions have ended, the sidecar's refusal (ErrUnauthorized,
// *RefusedError) if the stream cannot be opened, or when ctx ends.
//
// EOF on in is sent as a half-close; the peer's EOF closes out if it is
// an io.Closer. When the stream ends early in is closed if it is an
// io.Closer; Stdio waits for its pending Read to return, so pass a reader
// whose Close unblocks reads (a pipe, not a terminal).
func (c *Client) Stdio(ctx context.Context, hostport string, in io.Reader, out io.Writer) error {
	d, err := parseDst(hostport)
	if err != nil {
		return fmt.Errorf("tunnel: stdio: %w", err)
	}
	ws, err := c.dial(ctx, PathTCP, url.Values{"dst": {d.String()}})
	if err != nil {
		return err
	}
	splice(ctx, ws, &stdioConn{in: in, out: out}, c.ka)
	return nil
}

// stdioConn is a localConn over a reader and a writer.
type stdioConn struct {
	in  io.Reader
	out io.Writer
}

func (s *stdioConn) Read(p []byte) (int, error)  { return s.in.Read(p) }
func (s *stdioConn) Write(p []byte) (int, error) { return s.out.Write(p) }

func (s *stdioConn) CloseWrite() error {
	if c, ok := s.out.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (s *stdioConn) Close() error {
	if c, ok := s.in.(io.Closer); ok {
		_ = c.Close()
	}
	return s.CloseWrite()
}
