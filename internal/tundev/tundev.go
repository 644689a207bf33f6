// Package tundev lets tests choose the mode of /dev/net/tun for one
// process tree without touching the machine's device node: the command
// runs in a private mount namespace where a fresh node for the same device
// (10:200) with the wanted mode is bind-mounted over /dev/net/tun.
//
// Changing the real node's mode would race between test packages that go
// test runs in parallel (one wants 0666, another checks the error at
// 0600). Needs root and util-linux's unshare.
package tundev

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Path is the TUN clone device.
const Path = "/dev/net/tun"

// script mounts a small tmpfs on $0 (where /tmp is nodev, a node made
// there could not be opened), makes the node, bind-mounts it and execs
// the command.
const script = `set -e
mount -t tmpfs -o mode=0755,size=64k meshlaunch-tundev "$0"
mknod "$0/tun" c %d %d
chmod %o "$0/tun"
mount --bind "$0/tun" ` + Path + `
exec "$@"`

// Wrap returns argv prefixed so that it runs with /dev/net/tun at mode.
// dir is an empty directory; a tmpfs is mounted on it in the private
// mount namespace only.
func Wrap(dir string, mode os.FileMode, argv ...string) []string {
	major, minor := deviceNumber()
	return append([]string{"unshare", "--mount", "--propagation", "private",
		"sh", "-c", fmt.Sprintf(script, major, minor, mode.Perm()), filepath.Clean(dir)}, argv...)
}

// deviceNumber is /dev/net/tun's, or the usual 10:200 if it is missing
// (the command then fails the way it would on such a machine).
func deviceNumber() (uint32, uint32) {
	var st unix.Stat_t
	if err := unix.Stat(Path, &st); err != nil {
		return 10, 200
	}
	return unix.Major(st.Rdev), unix.Minor(st.Rdev)
}
