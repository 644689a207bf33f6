package nslauncher

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// check is one command the job runs; its status and output are reported
// on stdout as one line "NAME<TAB>STATUS<TAB>OUTPUT" (newlines in OUTPUT
// become spaces), so that one launcher run answers several questions.
type check struct {
	name string // a word
	cmd  string // shell command
}

// curlCheck fetches url, bounded so that a blocked destination fails
// within seconds instead of hanging the job.
func curlCheck(name, url string) check {
	return check{name, "curl -sS --connect-timeout 3 --max-time 5 " + url}
}

// checkJob is a job that runs checks in order and exits 0.
func checkJob(checks ...check) []string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "out=$(%s 2>&1); st=$?\n", c.cmd)
		fmt.Fprintf(&b, "printf '%%s\\t%%s\\t%%s\\n' %s \"$st\" \"$(printf '%%s' \"$out\" | tr '\\n' ' ')\"\n", c.name)
	}
	return []string{"sh", "-c", b.String()}
}

type result struct {
	status int
	out    string
}

// parseChecks reads checkJob's report from the launcher's stdout.
func parseChecks(stdout string) map[string]result {
	res := make(map[string]result)
	for line := range strings.Lines(stdout) {
		f := strings.SplitN(strings.TrimRight(line, "\n"), "\t", 3)
		if len(f) != 3 {
			continue
		}
		st, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		res[f[0]] = result{status: st, out: strings.TrimSpace(f[2])}
	}
	return res
}

// wantOK checks that check name succeeded and returns its output.
func wantOK(t *testing.T, res map[string]result, name string) (out string, ok bool) {
	t.Helper()
	r, ok := res[name]
	switch {
	case !ok:
		t.Errorf("%s: no report from the job", name)
	case r.status != 0:
		t.Errorf("%s: exit status %d, want 0: %s", name, r.status, r.out)
		ok = false
	}
	return r.out, ok
}

// wantFailed checks that check name ran and failed.
func wantFailed(t *testing.T, res map[string]result, name string) {
	t.Helper()
	r, ok := res[name]
	switch {
	case !ok:
		t.Errorf("%s: no report from the job", name)
	case r.status == 0:
		t.Errorf("%s: succeeded (%q), want a failure", name, r.out)
	}
}

// wantClient checks that check name fetched from an httpecho that saw the
// client at host (httpecho answers the client's address).
func wantClient(t *testing.T, res map[string]result, name, host string) {
	t.Helper()
	out, ok := wantOK(t, res, name)
	if !ok {
		return
	}
	ap, err := netip.ParseAddrPort(out)
	if err != nil || ap.Addr().String() != host {
		t.Errorf("%s: httpecho saw client %q, want %s:PORT", name, out, host)
	}
}
