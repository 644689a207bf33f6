package launcher

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// Sentinels for conditions a caller branches on (e.g. falling back to
// `meshlaunch tunnel`). Errors returned by Start wrap at most one of them.
var (
	// ErrUserNamespaces: this node does not let an unprivileged user create
	// user namespaces.
	ErrUserNamespaces = errors.New("unprivileged user namespaces are not available")
	// ErrTunPermission: /dev/net/tun cannot be opened by this user.
	ErrTunPermission = errors.New("no permission to open /dev/net/tun")
	// ErrTunMissing: /dev/net/tun does not exist or the tun module is absent.
	ErrTunMissing = errors.New("/dev/net/tun is not available")
	// ErrMount: a mount inside the namespace (resolv.conf, /proc) failed.
	ErrMount = errors.New("mount in the namespace failed")
)

// childError is a setup failure reported by the child. Its message is the
// child's, which already says what to do.
type childError struct {
	kind string
	msg  string
}

func (e *childError) Error() string { return "launcher: namespace setup: " + e.msg }

// Is maps the child's error kind to a sentinel.
func (e *childError) Is(target error) bool {
	switch e.kind {
	case messages.KindTunPermission:
		return target == ErrTunPermission
	case messages.KindTunMissing:
		return target == ErrTunMissing
	case messages.KindMount:
		return target == ErrMount
	}
	return false
}

// startError explains a failure to create the namespaces.
func startError(err error) error {
	if !isUsernsErrno(err) {
		return fmt.Errorf("launcher: start namespace child: %w", err)
	}
	return fmt.Errorf("launcher: start namespace child: %w (%s): %w", ErrUserNamespaces, usernsHint(), err)
}

func isUsernsErrno(err error) bool {
	for _, e := range []error{unix.EPERM, unix.EACCES, unix.ENOSPC, unix.EINVAL, unix.EUSERS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// usernsHint names the knob that disables user namespaces on this node.
func usernsHint() string {
	var hints []string
	if v, ok := readSysctl("user/max_user_namespaces"); ok && v == "0" {
		hints = append(hints, "sysctl user.max_user_namespaces is 0")
	}
	if v, ok := readSysctl("kernel/apparmor_restrict_unprivileged_userns"); ok && v == "1" {
		hints = append(hints, "sysctl kernel.apparmor_restrict_unprivileged_userns is 1")
	}
	if v, ok := readSysctl("kernel/unprivileged_userns_clone"); ok && v == "0" {
		hints = append(hints, "sysctl kernel.unprivileged_userns_clone is 0")
	}
	if len(hints) == 0 {
		return "ask the admin to allow unprivileged user namespaces (sysctls user.max_user_namespaces, " +
			"kernel.apparmor_restrict_unprivileged_userns), or use `meshlaunch tunnel`"
	}
	return strings.Join(hints, ", ") + ": ask the admin to change it, or use `meshlaunch tunnel`"
}

func readSysctl(name string) (string, bool) {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
