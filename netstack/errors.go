package netstack

import (
	"errors"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// Denied is a policy refusal with a reason. A Policy that returns an error
// wrapping *Denied has the flow counted under Reason in Stats.Denied.
type Denied struct {
	Reason string
}

// Error implements error.
func (d *Denied) Error() string {
	if d.Reason == "" {
		return "netstack: flow denied by policy"
	}
	return "netstack: flow denied by policy: " + d.Reason
}

// convertError converts a gVisor error at the package boundary. Errors with
// a POSIX meaning become the syscall.Errno, so errors.Is(err,
// syscall.ECONNREFUSED) and friends work for callers.
func convertError(e tcpip.Error) error {
	if e == nil {
		return nil
	}
	if errno, ok := errnoOf(e); ok {
		return errno
	}
	return errors.New(e.String())
}

// errnoOf maps the gVisor errors a caller may branch on.
func errnoOf(e tcpip.Error) (syscall.Errno, bool) {
	switch e.(type) {
	case *tcpip.ErrConnectionRefused:
		return syscall.ECONNREFUSED, true
	case *tcpip.ErrConnectionReset:
		return syscall.ECONNRESET, true
	case *tcpip.ErrConnectionAborted, *tcpip.ErrAborted:
		return syscall.ECONNABORTED, true
	case *tcpip.ErrTimeout:
		return syscall.ETIMEDOUT, true
	case *tcpip.ErrNetworkUnreachable, *tcpip.ErrNoNet:
		return syscall.ENETUNREACH, true
	case *tcpip.ErrHostUnreachable, *tcpip.ErrHostDown:
		return syscall.EHOSTUNREACH, true
	case *tcpip.ErrPortInUse, *tcpip.ErrDuplicateAddress:
		return syscall.EADDRINUSE, true
	case *tcpip.ErrBadLocalAddress, *tcpip.ErrNoPortAvailable:
		return syscall.EADDRNOTAVAIL, true
	case *tcpip.ErrAddressFamilyNotSupported:
		return syscall.EAFNOSUPPORT, true
	case *tcpip.ErrClosedForSend:
		return syscall.EPIPE, true
	case *tcpip.ErrNotConnected:
		return syscall.ENOTCONN, true
	case *tcpip.ErrAlreadyConnected:
		return syscall.EISCONN, true
	case *tcpip.ErrMessageTooLong:
		return syscall.EMSGSIZE, true
	case *tcpip.ErrNotPermitted:
		return syscall.EPERM, true
	case *tcpip.ErrInvalidEndpointState, *tcpip.ErrInvalidOptionValue:
		return syscall.EINVAL, true
	case *tcpip.ErrWouldBlock:
		return syscall.EAGAIN, true
	}
	return 0, false
}
