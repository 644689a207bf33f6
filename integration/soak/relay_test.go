package soak

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshlaunch/meshlaunch/internal/faultrelay"
)

// runRelay runs internal/faultrelay in front of TARGET on a free port of
// 127.0.0.1 and prints "relay listening on ADDR". On SIGUSR1 it resets
// every connection through it with a RST on both sides (a websocket cut
// without a FIN) and prints "relay reset"; SIGTERM stops it.
func runRelay(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: relay TARGET (got %q)", args)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGTERM) // before "listening": the test may signal at once
	r, err := faultrelay.New(args[0])
	if err != nil {
		return err
	}
	fmt.Printf("relay listening on %s\n", r.Addr())
	for s := range sig {
		if s == syscall.SIGTERM {
			break
		}
		r.Reset()
		fmt.Printf("relay reset (%d connections accepted so far)\n", r.Accepted())
	}
	return r.Close()
}
