package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// Finding is one result of Check.
type Finding struct {
	// Name says what was checked ("user namespaces", "/dev/net/tun", ...).
	Name string
	// OK is true when the check passed.
	OK bool
	// Detail explains a failure and what to do about it.
	Detail string
}

// Check reports whether this node can run `meshlaunch run`: unprivileged
// user namespaces, a PID namespace with its own /proc, and /dev/net/tun
// openable inside a user namespace. It starts a short-lived probe child
// (os.Args[1] == messages.ProbeArg, dispatched by launcher/child.MaybeRun).
func Check(ctx context.Context) []Finding {
	uns := Finding{Name: "user namespaces", OK: true}
	res, err := probe(ctx)
	if err != nil {
		uns.OK, uns.Detail = false, err.Error()
		return []Finding{uns, {Name: "/dev/net/tun", Detail: "not checked: no user namespace"},
			{Name: "PID namespace", Detail: "not checked: no user namespace"}}
	}
	return []Finding{uns, finding("/dev/net/tun", res.TUN),
		pidFinding(res), finding("mount namespace", res.Mount)}
}

func finding(name, errText string) Finding {
	return Finding{Name: name, OK: errText == "", Detail: errText}
}

func pidFinding(r messages.ProbeResult) Finding {
	if !r.PID1 {
		return Finding{Name: "PID namespace", Detail: "the probe was not PID 1 of a new PID namespace"}
	}
	return finding("PID namespace", r.Proc)
}

// probe runs the probe child in the namespaces Start would create and
// decodes its report.
func probe(ctx context.Context) (messages.ProbeResult, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, selfExe, messages.ProbeArg)
	cmd.Args[0] = os.Args[0]
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = namespaceAttr(false)
	// Pdeathsig is per thread: keep this thread for the probe's life.
	runtime.LockOSThread()
	err := cmd.Run()
	runtime.UnlockOSThread()
	var r messages.ProbeResult
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return r, fmt.Errorf("launcher: probe failed (does main call child.MaybeRun first?): %w: %s", err, errOut.Bytes())
		}
		return r, startError(err)
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("launcher: probe output: %w", err)
	}
	return r, nil
}
