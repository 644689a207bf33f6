package child

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// tunPath is the clone device.
const tunPath = "/dev/net/tun"

// createTUN creates the TUN interface name (IFF_TUN|IFF_NO_PI: raw IP
// packets, no offloads) and returns its file. The interface lives while a
// descriptor of it is open.
func createTUN(name string) (*os.File, error) {
	fd, err := openTUN()
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("child: tun name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("child: create tun %q (TUNSETIFF): %w", name, err)
	}
	return os.NewFile(uintptr(fd), tunPath), nil
}

// openTUN opens /dev/net/tun read-write, close-on-exec. Errors carry a
// setupError kind and say what to do.
func openTUN() (int, error) {
	fd, err := unix.Open(tunPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return -1, withKind(messages.KindTunPermission, fmt.Errorf(
			"child: cannot open %s (mode 0600 here?): ask the admin for mode 0666, or use `meshlaunch tunnel`: %w", tunPath, err))
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO):
		return -1, withKind(messages.KindTunMissing, fmt.Errorf(
			"child: %s is missing or the tun module is not loaded: ask the admin to load it (modprobe tun), or use `meshlaunch tunnel`: %w", tunPath, err))
	default:
		return -1, fmt.Errorf("child: open %s: %w", tunPath, err)
	}
}
