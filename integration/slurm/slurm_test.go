package slurm

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/tundev"
)

// slurmCluster is munged, slurmctld and slurmd in the topology's node
// namespace, configured by files in dir. The daemons are nstest processes:
// stopped at the test's cleanup, and whatever they started (slurmstepd,
// jobs) is killed with the namespace.
type slurmCluster struct {
	topo *nstest.Topology
	dir  string // 0755: the configuration, the munge socket, the spool
	conf string // slurm.conf, for $SLURM_CONF
	prog map[string]string

	daemons []*nstest.Proc
}

// startSlurm starts a one-node SLURM in the node namespace and waits until
// the node is idle. SlurmctldHost and NodeName are "localhost": the node
// namespace's own loopback, where slurmctld and slurmd find each other.
func startSlurm(t *testing.T, topo *nstest.Topology, dir string) *slurmCluster {
	t.Helper()
	s := &slurmCluster{topo: topo, dir: dir, conf: filepath.Join(dir, "slurm.conf"), prog: map[string]string{}}
	for _, name := range slurmPrograms {
		p, err := findProgram(name)
		if err != nil {
			t.Skip(err)
		}
		s.prog[name] = p
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{
		{"munge", 0o755},  // the socket, which every user connects to
		{"state", 0o700},  // slurmctld's state, SlurmUser's only
		{"spool", 0o755},  // slurmd's spool: job scripts, read by the job's user
		{"cgroup", 0o755}, // an empty cgroup mount point, see writeConfig
	} {
		if err := os.Mkdir(filepath.Join(dir, d.name), d.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, d.name), d.mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	s.startMunge(t)
	s.writeConfig(t)
	env := nstest.ProcOpts{Env: []string{"SLURM_CONF=" + s.conf}}
	s.daemons = append(s.daemons, topo.Start(t, topo.Node, env, s.prog["slurmctld"], "-D"))
	// slurmd, and so every job step, sees /dev/net/tun at 0666 (in its own
	// mount namespace), as on a node whose site grants it to users.
	s.daemons = append(s.daemons, topo.Start(t, topo.Node, env,
		tundev.Wrap(t.TempDir(), 0o666, s.prog["slurmd"], "-D", "-N", "localhost")...))
	s.waitIdle(t, 30*time.Second)
	return s
}

// startMunge writes a fresh key and starts munged in the foreground, its
// socket in dir/munge (slurm.conf's AuthInfo points there).
func (s *slurmCluster) startMunge(t *testing.T) {
	t.Helper()
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(s.dir, "munge")
	if err := os.WriteFile(filepath.Join(mdir, "munge.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	p := s.topo.Start(t, s.topo.Node, nstest.ProcOpts{}, s.prog["munged"], "--foreground",
		"--socket="+s.mungeSocket(), "--key-file="+filepath.Join(mdir, "munge.key"),
		"--pid-file="+filepath.Join(mdir, "munged.pid"), "--seed-file="+filepath.Join(mdir, "munged.seed"),
		"--log-file="+filepath.Join(mdir, "munged.log"))
	s.daemons = append(s.daemons, p)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(s.mungeSocket()); err == nil {
			return
		}
		select {
		case <-p.Done():
			t.Fatalf("munged exited:\n%s", p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("munged made no socket at %s within 10 s:\n%s", s.mungeSocket(), p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *slurmCluster) mungeSocket() string { return filepath.Join(s.dir, "munge", "munge.socket") }

// writeConfig writes slurm.conf and cgroup.conf.
//
// slurmd initialises a cgroup plugin even when no cgroup feature is used,
// and "ip netns exec" mounts a fresh /sys without /sys/fs/cgroup, so
// autodetection fails there. cgroup/v1 with an empty mount point of its
// own starts, and nothing here asks it for a controller (proctrack/linuxproc,
// task/none, no accounting).
func (s *slurmCluster) writeConfig(t *testing.T) {
	t.Helper()
	conf := strings.Join([]string{
		"ClusterName=meshlaunch",
		"SlurmctldHost=localhost",
		"SlurmUser=root",
		"SlurmdUser=root",
		"AuthType=auth/munge",
		"CredType=cred/munge",
		"AuthInfo=socket=" + s.mungeSocket(),
		"ProctrackType=proctrack/linuxproc",
		"TaskPlugin=task/none",
		"SelectType=select/cons_tres",
		"MpiDefault=none",
		"MailProg=/bin/true",
		"ReturnToService=2",
		// The node's CPUs and memory as configured, not as detected.
		"SlurmdParameters=config_overrides",
		"KillWait=5",
		"StateSaveLocation=" + filepath.Join(s.dir, "state"),
		"SlurmdSpoolDir=" + filepath.Join(s.dir, "spool"),
		"SlurmctldPidFile=" + filepath.Join(s.dir, "slurmctld.pid"),
		"SlurmdPidFile=" + filepath.Join(s.dir, "slurmd.pid"),
		"NodeName=localhost CPUs=2 RealMemory=1000 State=UNKNOWN",
		"PartitionName=debug Nodes=localhost Default=YES MaxTime=10 State=UP",
		"",
	}, "\n")
	cgroup := "CgroupPlugin=cgroup/v1\nCgroupMountpoint=" + filepath.Join(s.dir, "cgroup") + "\n"
	for name, text := range map[string]string{"slurm.conf": conf, "cgroup.conf": cgroup} {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitIdle polls sinfo until the node is idle.
func (s *slurmCluster) waitIdle(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var state string
	for {
		out, _, code := s.run(t, "", s.prog["sinfo"], "--noheader", "--Node", "--format=%T")
		state = strings.TrimSpace(out)
		if code == 0 && state == "idle" {
			return
		}
		s.checkDaemons(t)
		if time.Now().After(deadline) {
			t.Fatalf("SLURM node not idle within %v (sinfo: %q)", timeout, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkDaemons fails t if a daemon has exited.
func (s *slurmCluster) checkDaemons(t *testing.T) {
	t.Helper()
	for _, p := range s.daemons {
		select {
		case <-p.Done():
			code, _ := p.Wait(time.Second)
			t.Fatalf("%s exited (%d):\n%s", p.Name(), code, p.Stderr())
		default:
		}
	}
}

// run runs a SLURM client in the node namespace with this cluster's
// configuration, as user ("" is root), with a clean environment: what a
// submitting user's shell would have, and nothing of the test's (proxies,
// Go settings). The job inherits sbatch's environment.
func (s *slurmCluster) run(t *testing.T, user string, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	return s.runIn(t, user, "", nil, argv...)
}

// runIn is run in directory dir with extra environment variables.
func (s *slurmCluster) runIn(t *testing.T, user, dir string, env []string, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	full := append([]string{"env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=/tmp", "LANG=C", "SLURM_CONF=" + s.conf}, env...)
	return s.topo.Run(t, s.topo.Node, nstest.ProcOpts{User: user, Dir: dir, Timeout: 20 * time.Second},
		append(full, argv...)...)
}

// submit runs sbatch as user in dir and returns the job id.
func (s *slurmCluster) submit(t *testing.T, user, dir string, env []string, script string) string {
	t.Helper()
	out, stderr, code := s.runIn(t, user, dir, env, s.prog["sbatch"], "--parsable", script)
	if code != 0 {
		t.Fatalf("sbatch %s as %s: exit %d: %s", script, user, code, stderr)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // "ID" or "ID;cluster"
	if id == "" {
		t.Fatalf("sbatch printed no job id: %q %q", out, stderr)
	}
	return id
}

// jobInfo is what the test reads of "scontrol show job".
type jobInfo struct {
	State    string // JobState: COMPLETED, FAILED, ...
	ExitCode string // "STATUS:SIGNAL"
	User     string // UserId: "nobody(65534)"
}

// finalStates are the JobStates of a job that has ended.
var finalStates = []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
	"PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}

// waitJob polls scontrol until job id has ended and returns its record.
func (s *slurmCluster) waitJob(t *testing.T, id string, timeout time.Duration) jobInfo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		out, stderr, code := s.run(t, "", s.prog["scontrol"], "--oneliner", "show", "job", id)
		if code == 0 {
			last = out
			info := parseJob(out)
			for _, st := range finalStates {
				if info.State == st {
					return info
				}
			}
		} else {
			last = stderr
		}
		s.checkDaemons(t)
		if time.Now().After(deadline) {
			t.Fatalf("job %s has not ended within %v; scontrol: %s", id, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// parseJob reads the fields jobInfo needs from one "scontrol --oneliner
// show job" line of KEY=VALUE pairs.
func parseJob(line string) jobInfo {
	var info jobInfo
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch k {
		case "JobState":
			info.State = v
		case "ExitCode":
			info.ExitCode = v
		case "UserId":
			info.User = v
		}
	}
	return info
}

func (j jobInfo) String() string {
	return fmt.Sprintf("JobState=%s ExitCode=%s UserId=%s", j.State, j.ExitCode, j.User)
}
