package launcher

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"
)

// fileTUN is a tun.Device over a TUN descriptor received from the child.
//
// wireguard-go's own tun.CreateTUNFromFile looks the interface up by name
// over netlink in the caller's network namespace, where it does not exist
// (it lives in the child's), and an unprivileged parent cannot enter that
// namespace. This device needs nothing but the descriptor: one raw IP
// packet per read and write (IFF_NO_PI, no offloads).
type fileTUN struct {
	f      *os.File
	name   string
	mtu    int
	events chan tun.Event
	once   sync.Once
}

var _ tun.Device = (*fileTUN)(nil)

// newFileTUN takes over f: it switches the descriptor to non-blocking so
// that reads wait in Go's poller and Close wakes them.
func newFileTUN(f *os.File, name string, mtu int) (*fileTUN, error) {
	// A fresh *os.File on a non-blocking duplicate is registered with the
	// poller; the original is closed (the interface lives on in the dup).
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("launcher: tun %s: dup: %w", name, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("launcher: tun %s: set non-blocking: %w", name, err)
	}
	t := &fileTUN{f: os.NewFile(uintptr(fd), name), name: name, mtu: mtu, events: make(chan tun.Event, 1)}
	t.events <- tun.EventUp
	return t, nil
}

func (t *fileTUN) File() *os.File           { return t.f }
func (t *fileTUN) MTU() (int, error)        { return t.mtu, nil }
func (t *fileTUN) Name() (string, error)    { return t.name, nil }
func (t *fileTUN) Events() <-chan tun.Event { return t.events }
func (t *fileTUN) BatchSize() int           { return 1 }

// Read reads one packet into bufs[0] at offset.
func (t *fileTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := t.f.Read(bufs[0][offset:])
	if err != nil {
		return 0, err
	}
	sizes[0] = n
	return 1, nil
}

// Write writes each packet; a packet the kernel refuses is dropped, as a
// router would, and the rest still go out.
func (t *fileTUN) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		if _, err := t.f.Write(b[offset:]); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return i, err
			}
		}
	}
	return len(bufs), nil
}

// Close closes the descriptor (the interface goes away with the child's
// copy) and the events channel; idempotent.
func (t *fileTUN) Close() error {
	var err error
	t.once.Do(func() {
		err = t.f.Close()
		close(t.events)
	})
	return err
}
