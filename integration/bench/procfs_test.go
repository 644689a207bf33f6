package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100
// on every Linux architecture's user ABI.
const userHZ = 100

// statusKiB reads a "kB" field such as VmRSS or VmHWM of /proc/PID/status.
func statusKiB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, field, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// statFields returns the fields of /proc/PID/stat after the command name
// (field 3, the state, is index 0).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(s[i+1:]), nil
}

// cpuSeconds is utime+stime of pid (its own threads, not its children).
func cpuSeconds(pid int) (float64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return float64(utime+stime) / userHZ, nil
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var kids []int
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		f, err := statFields(p)
		if err != nil || len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			kids = append(kids, p)
		}
	}
	return kids
}

// proc is a process whose CPU time a path is charged with.
type proc struct {
	name string
	pid  int
}

// cpuSnapshot reads the CPU seconds of every process in ps.
func cpuSnapshot(ps []proc) (map[string]float64, error) {
	m := make(map[string]float64, len(ps))
	for _, p := range ps {
		s, err := cpuSeconds(p.pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		m[p.name] = s
	}
	return m, nil
}
