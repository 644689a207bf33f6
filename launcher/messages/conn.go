package messages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// maxMessage bounds one datagram; configs are a few hundred bytes.
const maxMessage = 64 << 10

// Conn is one end of the parent/child socketpair. It is safe for one sender
// and one receiver at a time.
type Conn struct {
	uc *net.UnixConn
}

// Socketpair returns a connected SOCK_SEQPACKET pair: the parent's end as a
// Conn and the child's end as a file to pass in exec.Cmd.ExtraFiles. The
// caller closes the child's file after starting the child.
func Socketpair() (*Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("messages: socketpair: %w", err)
	}
	c, err := FileConn(os.NewFile(uintptr(fds[0]), "meshlaunch-parent"))
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c, os.NewFile(uintptr(fds[1]), "meshlaunch-child"), nil
}

// FileConn makes a Conn from f and closes f (the Conn holds a duplicate).
func FileConn(f *os.File) (*Conn, error) {
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("messages: %s: %w", f.Name(), err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("messages: %s: not a unix socket", f.Name())
	}
	return &Conn{uc: uc}, nil
}

// Close closes the connection; a blocked Recv returns.
func (c *Conn) Close() error { return c.uc.Close() }

// Send writes m, passing file's descriptor along if file is not nil. The
// caller keeps ownership of file.
func (c *Conn) Send(ctx context.Context, m Message, file *os.File) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("messages: encode %s: %w", m.Type, err)
	}
	var oob []byte
	if file != nil {
		oob = unix.UnixRights(int(file.Fd()))
	}
	stop := c.deadlineOnDone(ctx, c.uc.SetWriteDeadline)
	defer stop()
	if _, _, err := c.uc.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("messages: send %s: %w", m.Type, ctxErr(ctx, err))
	}
	return nil
}

// Recv reads one message and the file passed with it, if any (the caller
// owns it). IsPeerGone reports the error when the peer has closed its end.
func (c *Conn) Recv(ctx context.Context) (Message, *os.File, error) {
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	stop := c.deadlineOnDone(ctx, c.uc.SetReadDeadline)
	defer stop()
	n, oobn, _, _, err := c.uc.ReadMsgUnix(buf, oob)
	if errors.Is(err, io.EOF) {
		err = errPeerGone
	}
	if err != nil {
		return Message{}, nil, fmt.Errorf("messages: receive: %w", ctxErr(ctx, err))
	}
	file, err := parseFile(oob[:oobn])
	if err != nil {
		return Message{}, nil, err
	}
	if n == 0 {
		closeFile(file)
		return Message{}, nil, fmt.Errorf("messages: receive: %w", errPeerGone)
	}
	var m Message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		closeFile(file)
		return Message{}, nil, fmt.Errorf("messages: decode: %w", err)
	}
	return m, file, nil
}

// errPeerGone is returned when the peer closed its end (a zero-length
// datagram on SOCK_SEQPACKET).
var errPeerGone = errors.New("peer closed the connection")

// IsPeerGone reports whether err says the other end closed the connection.
func IsPeerGone(err error) bool { return errors.Is(err, errPeerGone) }

// deadlineOnDone unblocks the pending call when ctx ends (a read blocked in
// the kernel never checks ctx by itself).
func (c *Conn) deadlineOnDone(ctx context.Context, set func(time.Time) error) (stop func()) {
	unregister := context.AfterFunc(ctx, func() { set(time.Unix(1, 0)) })
	return func() { unregister() }
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func parseFile(oob []byte) (*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("messages: control message: %w", err)
	}
	var fds []int
	for _, cm := range cmsgs {
		got, err := unix.ParseUnixRights(&cm)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if len(fds) == 0 {
		return nil, nil
	}
	for _, fd := range fds[1:] {
		unix.Close(fd)
	}
	return os.NewFile(uintptr(fds[0]), "passed-fd"), nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}
