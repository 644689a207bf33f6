package child

import (
	"encoding/json"
	"os"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// Probe runs inside freshly created namespaces (as Run does, but with no
// parent protocol), tries each setup step that needs a privilege and prints
// a messages.ProbeResult. It returns the process exit code.
func Probe() int {
	r := messages.ProbeResult{PID1: os.Getpid() == 1}
	r.Mount = errText(makeMountsPrivate())
	if tun, err := createTUN("mlprobe0"); err == nil {
		tun.Close()
	} else {
		r.TUN = err.Error()
	}
	if r.Mount == "" {
		r.Proc = errText(mountProc())
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
