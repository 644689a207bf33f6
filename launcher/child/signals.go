package child

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the child passes on to the job. The parent
// forwards the same set to the child.
var forwarded = []os.Signal{
	unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
}

// notifySignals catches the forwarded signals and SIGCHLD for the life of
// the process (the child exits rather than stopping the notification).
func notifySignals() <-chan os.Signal {
	c := make(chan os.Signal, 32)
	signal.Notify(c, append([]os.Signal{unix.SIGCHLD}, forwarded...)...)
	return c
}

// terminatingCode tells whether s ends the child before the job starts, and
// the exit code it ends with.
func terminatingCode(s os.Signal) (int, bool) {
	switch s {
	case unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT:
		return 128 + int(s.(unix.Signal)), true
	}
	return 0, false
}
