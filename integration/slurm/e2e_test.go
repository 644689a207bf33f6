package slurm

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

// jobTimeout bounds each batch job, from sbatch to its end.
const jobTimeout = 90 * time.Second

// TestSlurm runs batch jobs on a real SLURM in the remote node's
// namespace, submitted by nobody, that join the simulated cluster through
// "meshlaunch run" and the Ingress.
func TestSlurm(t *testing.T) {
	requireE2E(t)
	start := time.Now()
	c := newCluster(t)
	t.Logf("topology, Ingress and SLURM up in %v", time.Since(start).Round(time.Millisecond))
	t.Run("srun", c.testSrun)
	t.Run("scancel", c.testScancel)
	t.Run("interlink-pre-exec", c.testInterLinkPreExec)
}

// testSrun: a batch script runs "srun meshlaunch run ... -- curl
// http://web/"; the Service answers with the client address it saw, the
// pod IP, and the job completes with status 0, as nobody.
func (c *cluster) testSrun(t *testing.T) {
	secret := c.NewSecret(t)
	c.startSidecar(t, secret, nil, "--pod-ip", nstest.PodIP,
		"--route", nstest.ServiceCIDR, "--route", nstest.ClusterCIDR)
	dir := c.jobDir(t, "srun")
	token := c.writeSecret(t, dir, secret)
	script := c.writeFile(t, filepath.Join(dir, "job.sh"), fmt.Sprintf(`#!/bin/sh
#SBATCH --job-name=meshlaunch-srun
#SBATCH --output=%[1]s/job.out
#SBATCH --error=%[1]s/job.err
#SBATCH --ntasks=1
#SBATCH --time=2
srun %[2]s run --server %[3]s --ca-file %[4]s --token-file %[5]s -- curl -sS --max-time 10 http://web/
`, dir, c.Bin, c.Ingress.URL, c.Ingress.CAFile, token), 0o644)

	id := c.slurm.submit(t, nobody, dir, nil, script)
	info := c.slurm.waitJob(t, id, jobTimeout)
	stdout, stderr := readFile(filepath.Join(dir, "job.out")), readFile(filepath.Join(dir, "job.err"))
	if info.State != "COMPLETED" || info.ExitCode != "0:0" {
		t.Errorf("job %s: %v, want COMPLETED with ExitCode=0:0", id, info)
	}
	if !strings.HasPrefix(info.User, nobody+"(") {
		t.Errorf("job %s ran as %s, want %s", id, info.User, nobody)
	}
	wantClient(t, "curl http://web/ in the job", stdout, nstest.PodIP)
	if !strings.Contains(stderr, "meshlaunch: joined "+c.Ingress.URL+" as "+nstest.PodIP) {
		t.Errorf("the launcher's status line is missing from the job's stderr")
	}
	t.Logf("job %s: %v\njob.out:\n%s\njob.err:\n%s", id, info, stdout, stderr)
}

// testScancel: scancel by the submitting user ends a job whose program
// runs under "meshlaunch run", and nothing of it is left on the node.
func (c *cluster) testScancel(t *testing.T) {
	secret := c.NewSecret(t)
	c.startSidecar(t, secret, nil, "--pod-ip", nstest.PodIP, "--route", nstest.ServiceCIDR)
	dir := c.jobDir(t, "scancel")
	token := c.writeSecret(t, dir, secret)
	script := c.writeFile(t, filepath.Join(dir, "job.sh"), fmt.Sprintf(`#!/bin/sh
#SBATCH --job-name=meshlaunch-scancel
#SBATCH --output=%[1]s/job.out
#SBATCH --error=%[1]s/job.err
#SBATCH --ntasks=1
#SBATCH --time=2
srun %[2]s run --server %[3]s --ca-file %[4]s --token-file %[5]s -- sleep %[6]s
`, dir, c.Bin, c.Ingress.URL, c.Ingress.CAFile, token, sleepMarker), 0o644)

	id := c.slurm.submit(t, nobody, dir, nil, script)
	deadline := time.Now().Add(jobTimeout)
	for !strings.Contains(readFile(filepath.Join(dir, "job.err")), "meshlaunch: joined") {
		c.slurm.checkDaemons(t)
		if time.Now().After(deadline) {
			t.Fatalf("job %s: the program did not start within %v\njob.err:\n%s", id, jobTimeout, readFile(filepath.Join(dir, "job.err")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(sleepers(t)); n != 1 {
		t.Fatalf("%d processes run sleep %s, want 1", n, sleepMarker)
	}
	if _, stderr, code := c.slurm.run(t, nobody, c.slurm.prog["scancel"], id); code != 0 {
		t.Fatalf("scancel %s: exit %d: %s", id, code, stderr)
	}
	info := c.slurm.waitJob(t, id, jobTimeout)
	if info.State != "CANCELLED" {
		t.Errorf("job %s after scancel: %v, want CANCELLED", id, info)
	}
	for deadline := time.Now().Add(15 * time.Second); len(sleepers(t)) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job's program still runs 15 s after scancel: pids %v", sleepers(t))
		}
	}
	t.Logf("job %s: %v\njob.err:\n%s", id, info, readFile(filepath.Join(dir, "job.err")))
}

// sleepMarker is the argument of the scancel test's "sleep", which finds
// it among the machine's processes.
const sleepMarker = "4242.5"

// sleepers returns the pids of processes running "sleep sleepMarker".
func sleepers(t *testing.T) []int {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "sleep\x00"+sleepMarker+"\x00" {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// testInterLinkPreExec: job.slurm laid out as interLink's SLURM plugin
// writes it, with deploy/interlink/pre-exec.sh rendered as the mesh script
// and a sidecar configured as deploy/interlink/shadow-pod.yaml configures
// it (POD_IP from the environment, no routes of its own, the secret a
// hex RandomPassword). job.sh runs inside the mesh: it reaches the Service
// from the pod IP, its exit status becomes the job's, the launcher runs
// once, and the secret's file is gone from the node afterwards.
func (c *cluster) testInterLinkPreExec(t *testing.T) {
	secret := randomPassword(t)
	c.startSidecar(t, secret, []string{"POD_IP=" + nstest.PodIP}, "--expose", "9000/tcp")
	dir := c.jobDir(t, "interlink")
	tmp := c.privateDir(t, filepath.Join(dir, "tmp"))
	preExec := renderPreExec(t, meshScriptData{
		RandomPassword:  secret,
		IngressEndpoint: nstest.EdgeNodeIP,
		ServiceCIDR:     nstest.ServiceCIDR,
		PodCIDRCluster:  nstest.ClusterCIDR,
		DNSServiceIP:    nstest.ServiceIP,
		WGMTU:           1280,
		UnshareMode:     "auto",
	})
	c.writeFile(t, filepath.Join(dir, "job.sh"), fmt.Sprintf(`#!/bin/sh
# The pod's containers would run here.
curl -sS --max-time 10 http://web/ >%s/run-web.out || exit
exit 3
`, dir), 0o755)
	script := c.writeFile(t, filepath.Join(dir, "job.slurm"), fmt.Sprintf(`#!/bin/bash
#SBATCH --job-name=meshlaunch-interlink
#SBATCH --output=%[1]s/job.out
#SBATCH --time=2
%[2]s
%[1]s/job.sh
`, dir, preExec), 0o644)

	// The site's environment: meshlaunch in PATH, the Ingress's CA.
	env := []string{"PATH=" + c.Dir + ":/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp,
		"MESHLAUNCH_CA_FILE=" + c.Ingress.CAFile}
	id := c.slurm.submit(t, nobody, dir, env, script)
	info := c.slurm.waitJob(t, id, jobTimeout)
	out := readFile(filepath.Join(dir, "job.out"))
	if info.State != "FAILED" || info.ExitCode != "3:0" {
		t.Errorf("job %s: %v, want job.sh's exit status 3 (FAILED, ExitCode=3:0)", id, info)
	}
	wantClient(t, "curl http://web/ in job.sh", readFile(filepath.Join(dir, "run-web.out")), nstest.PodIP)
	joined := "meshlaunch: joined wss://" + nstest.EdgeNodeIP + " as " + nstest.PodIP
	if n := strings.Count(out, joined); n != 1 {
		t.Errorf("job.out has %d launcher status lines %q, want 1", n, joined)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "meshlaunch.*")); len(left) > 0 {
		t.Errorf("the pre-exec left %v on the node", left)
	}
	t.Logf("job %s: %v\nrun-web.out: %s\njob.out:\n%s", id, info,
		strings.TrimSpace(readFile(filepath.Join(dir, "run-web.out"))), out)
	if t.Failed() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			t.Logf("job dir: %s", e.Name())
		}
	}
}

// wantClient checks that body, httpecho's answer, is CLIENTIP:PORT with
// the client address ip.
func wantClient(t *testing.T, what, body, ip string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(strings.TrimSpace(body))
	if err != nil || ap.Addr().String() != ip {
		t.Errorf("%s: the Service saw client %q, want %s:PORT", what, strings.TrimSpace(body), ip)
	}
}
