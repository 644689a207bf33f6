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
)

// Path is the TUN clone device.
const Path = "/dev/net/tun"

// script makes the node in $0, bind-mounts it and execs the command.
const script = `set -e
mknod "$0/tun" c 10 200
chmod %o "$0/tun"
mount --bind "$0/tun" ` + Path + `
exec "$@"`

// Wrap returns argv prefixed so that it runs with /dev/net/tun at mode.
// dir must be a directory on a filesystem that allows device nodes (a
// test's temporary directory under /tmp does); the node is created there.
func Wrap(dir string, mode os.FileMode, argv ...string) []string {
	node := filepath.Clean(dir)
	return append([]string{"unshare", "--mount", "--propagation", "private",
		"sh", "-c", fmt.Sprintf(script, mode.Perm()), node}, argv...)
}
