package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
	"github.com/meshlaunch/meshlaunch/internal/tundev"
)

// Ports and addresses of the benchmark, all inside the topology.
const (
	nobody    = "nobody"
	iperfPort = "5201" // iperf3 servers in svc, node and edge
	pingPort  = "7001" // ping-pong servers in svc, node and edge
	sinkPort  = "7002" // the 1,000 idle flows' server in svc
	// Exposed ports of the pod: the job's own servers (mesh ingress) and
	// the tunnel's -R registrations.
	jobIperfPort      = "9000"
	jobPingPort       = "9001"
	ingressBufferSize = "64k" // nginx's proxy_buffer_size, as deploy/kubernetes sets it
	revIperfPort      = "9100"
	revPingPort       = "9101"
	// The meshlaunch processes' --pprof-addr, each on the loopback of
	// its own namespace (pod for the sidecar, node for the others).
	sidecarPprof    = "127.0.0.1:6060"
	launcherPprof   = "127.0.0.1:6061"
	tunnelPprof     = "127.0.0.1:6062"
	localIperfPort  = "15201" // tunnel -L on the node's 127.0.0.1
	localPingPort   = "17001"
	slirpMTU        = "65520"
	pastaAddr       = "10.0.2.100" // the user namespace's address under pasta,
	pastaGateway    = "10.0.2.2"   // as slirp4netns's defaults, so that
	pastaPrefixBits = "24"         // 198.18.0.2 is not local in it
)

// bench is one nstest.MeshCluster with everything the paths need: Roles
// is the copy of the test binary ($BENCH_ROLE picks the role), Token the
// shared secret's file.
type bench struct {
	*nstest.MeshCluster
	cfg    config
	nobody [2]int // uid, gid

	launcher    *nstest.Proc // the long-lived "meshlaunch run", job = agent
	launcherPid int          // the launcher's parent half, in node
	childPid    int          // its child, PID 1 of the job's namespaces
	agentSock   string
	tunnel      *nstest.Proc
	slirp       userNS // slirp4netns's user namespace
	pasta       userNS // pasta's

	cmds []cmdNote // the commands, for docs/benchmarks.md
	res  results
}

// cmdNote is one command as docs/benchmarks.md shows it.
type cmdNote struct{ what, ns, user, argv string }

// note records a command for the report, with the benchmark's directory
// written as $DIR.
func (b *bench) note(what, ns, user string, argv ...string) {
	s := strings.Join(argv, " ")
	for _, r := range []struct{ from, to string }{{b.Roles, "$ROLES"}, {b.Bin, "meshlaunch"}, {b.Ingress.CAFile, "$CA"}, {b.Dir, "$DIR"}} {
		if r.from != "" {
			s = strings.ReplaceAll(s, r.from, r.to)
		}
	}
	b.cmds = append(b.cmds, cmdNote{what: what, ns: ns, user: cmp.Or(user, "root"), argv: s})
}

// nsLabel names a namespace of the topology by its role.
func (b *bench) nsLabel(ns string) string {
	return strings.TrimPrefix(ns, b.Topo.Prefix)
}

// newBench builds the cluster (nstest.NewMeshCluster: the sidecar as
// nobody exposing the job's and the tunnel's ports, nginx, the secret)
// and starts the servers in svc, node and edge.
func newBench(t *testing.T, cfg config) *bench {
	t.Helper()
	u, err := user.Lookup(nobody)
	if err != nil {
		t.Skipf("no user %s: %v", nobody, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	b := &bench{cfg: cfg, nobody: [2]int{uid, gid}}
	b.MeshCluster = nstest.NewMeshCluster(t, nstest.MeshOpts{ // skips unless root
		Meshlaunch: meshlaunchBin,
		Roles:      "bench-roles",
		Sidecar: nstest.SidecarOpts{
			Expose: []string{jobIperfPort, jobPingPort, revIperfPort, revPingPort},
			Flags:  []string{"--pprof-addr", sidecarPprof}, // profilesPhase
		},
		// The buffer size deploy/kubernetes recommends for the Ingress
		// (nginx.ingress.kubernetes.io/proxy-buffer-size); docs/kubernetes.md.
		Ingress: nstest.IngressOpts{BufferSize: ingressBufferSize},
	})
	waitExe(t, b.Sidecar.Pid(), "/meshlaunch") // its memory is measured by pid
	topo := b.Topo
	b.note("secret", "", "", "meshlaunch token > $DIR/token")

	// Servers: iperf3 and ping-pong in svc (the Service IP), node (all
	// addresses: 198.18.0.2 and 127.0.0.1) and edge (the veth peer of
	// node); the idle-flow sink in svc.
	for _, s := range []struct{ ns, bind string }{
		{topo.Svc, nstest.ServiceIP}, {topo.Node, ""}, {topo.Edge, nstest.EdgeNodeIP},
	} {
		argv := []string{"iperf3", "-s", "-p", iperfPort, "--forceflush"}
		pingAddr := "0.0.0.0:" + pingPort
		if s.bind != "" {
			argv = append(argv, "-B", s.bind)
			pingAddr = s.bind + ":" + pingPort
		}
		p := topo.Start(t, s.ns, nstest.ProcOpts{User: nobody}, argv...)
		b.note("iperf3 server", b.nsLabel(s.ns), nobody, argv...)
		b.startRole(t, s.ns, "pingserver", pingAddr)
		waitOutput(t, p, 10*time.Second, "Server listening")
	}
	b.startRole(t, topo.Svc, "sink", nstest.ServiceIP+":"+sinkPort)

	// NewMeshCluster started these two first; the report lists them here.
	b.note("Ingress", "edge", "root (workers nobody)", "nginx: TLS on "+nstest.EdgeNodeIP+":443, proxy_pass http://"+nstest.SidecarAddr+", websocket upgrade, proxy_buffering off, proxy_buffer_size "+ingressBufferSize+" (as deploy/kubernetes sets it)")
	b.note("sidecar", "pod", nobody, b.SidecarArgv()...)
	return b
}

// startRole runs one of this package's roles as nobody in ns.
func (b *bench) startRole(t *testing.T, ns, role string, args ...string) *nstest.Proc {
	t.Helper()
	argv := append([]string{b.Roles}, args...)
	b.note(role+" (this package's role)", b.nsLabel(ns), nobody, append([]string{roleEnv + "=" + role}, argv...)...)
	return b.Topo.Start(t, ns, nstest.ProcOpts{User: nobody, Env: []string{roleEnv + "=" + role}}, argv...)
}

// setprivNobody drops to nobody with no capabilities at all, as nstest
// does for ProcOpts.User.
func (b *bench) setprivNobody() []string {
	return []string{"setpriv", "--reuid=" + strconv.Itoa(b.nobody[0]), "--regid=" + strconv.Itoa(b.nobody[1]),
		"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--pdeathsig=KILL", "--"}
}

// asNobodyWithTun is the prefix of a command that needs /dev/net/tun as
// nobody: a private node at 0666 in a private mount namespace (the
// host's node is never changed), then setpriv.
func (b *bench) asNobodyWithTun(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(tundev.Path); err != nil {
		t.Skipf("no %s: %v", tundev.Path, err)
	}
	return tundev.Wrap(t.TempDir(), 0o666, b.setprivNobody()...)
}

// launcherOpts is the launcher's and the tunnel's environment: no proxy
// (the host's must not leak in) and a HOME nobody can use.
func launcherOpts(timeout time.Duration) nstest.ProcOpts {
	env := []string{"HOME=/tmp"}
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} {
		env = append(env, v+"=", strings.ToLower(v)+"=")
	}
	return nstest.ProcOpts{Env: env, Timeout: timeout}
}

// runArgv is "meshlaunch run" with the cluster's Ingress and secret,
// then flags.
func (b *bench) runArgv(flags []string, job ...string) []string {
	argv := []string{b.Bin, "run", "--server", b.Ingress.URL, "--ca-file", b.Ingress.CAFile,
		"--token-file", b.Token, "--wait", "30s", "--quiet"}
	argv = append(append(argv, flags...), "--")
	return append(argv, job...)
}

// startLauncher starts the long-lived "meshlaunch run" whose job is the
// agent, and waits until the agent answers.
func (b *bench) startLauncher(t *testing.T) {
	t.Helper()
	agentDir := filepath.Join(b.Dir, "agent")
	if err := os.Mkdir(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(agentDir, b.nobody[0], b.nobody[1]); err != nil {
		t.Fatal(err)
	}
	b.agentSock = filepath.Join(agentDir, "agent.sock")
	job := []string{"env", roleEnv + "=agent", b.Roles, b.agentSock}
	run := b.runArgv([]string{"--pprof-addr", launcherPprof}, job...)
	b.launcher = b.Topo.Start(t, b.Topo.Node, launcherOpts(0), append(b.asNobodyWithTun(t), run...)...)
	b.note("launcher (long-lived; its job runs the clients and servers of the mesh and host-NAT paths)", "node", nobody+", private /dev/net/tun 0666", run...)
	b.launcherPid = b.launcher.Pid()
	waitExe(t, b.launcherPid, "/meshlaunch")
	deadline := time.Now().Add(45 * time.Second)
	for {
		c, err := net.Dial("unix", b.agentSock)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-b.launcher.Done():
			t.Fatalf("launcher exited before its job answered:\nstdout:\n%s\nstderr:\n%s", b.launcher.Stdout(), b.launcher.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's agent did not answer within 45 s:\nstderr:\n%s", b.launcher.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	kids := childrenOf(b.launcherPid)
	if len(kids) != 1 {
		t.Fatalf("launcher %d has children %v, want its one namespace child", b.launcherPid, kids)
	}
	b.childPid = kids[0]
}

// agent sends one request to the job's agent.
func (b *bench) agent(t *testing.T, req agentRequest) agentResponse {
	t.Helper()
	c, err := net.Dial("unix", b.agentSock)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Duration(req.TimeoutMS)*time.Millisecond + 15*time.Second))
	if err := json.NewEncoder(c).Encode(req); err != nil {
		t.Fatalf("agent: send: %v", err)
	}
	var resp agentResponse
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		t.Fatalf("agent: %s %q: no answer: %v\nlauncher stderr:\n%s", req.Op, req.Argv, err, b.launcher.Stderr())
	}
	return resp
}

// inJob runs argv as the job of the long-lived launcher.
func (b *bench) inJob(t *testing.T, argv, env []string, timeout time.Duration) (string, string, int) {
	t.Helper()
	resp := b.agent(t, agentRequest{Op: "run", Argv: argv, Env: env, TimeoutMS: int(timeout / time.Millisecond)})
	if resp.Err != "" {
		return resp.Stdout, resp.Stderr + "\nagent: " + resp.Err, cmp.Or(resp.Code, -1)
	}
	return resp.Stdout, resp.Stderr, resp.Code
}

// startInJob starts argv in the background as the job; it returns the
// pid (for stopInJob) and the file with its output.
func (b *bench) startInJob(t *testing.T, argv, env []string) (int, string) {
	t.Helper()
	resp := b.agent(t, agentRequest{Op: "start", Argv: argv, Env: env})
	if resp.Err != "" {
		t.Fatalf("start %q in the job: %s", argv, resp.Err)
	}
	return resp.Pid, resp.OutPath
}

func (b *bench) stopInJob(t *testing.T, pid int) {
	t.Helper()
	if resp := b.agent(t, agentRequest{Op: "stop", Pid: pid}); resp.Err != "" {
		t.Errorf("stop %d in the job: %s", pid, resp.Err)
	}
}

// startJobServers starts iperf3 and the ping-pong server as the job, on
// the pod's exposed ports, and waits until the cluster reaches both.
func (b *bench) startJobServers(t *testing.T) {
	t.Helper()
	iperf := []string{"iperf3", "-s", "-p", jobIperfPort, "--forceflush"}
	_, out := b.startInJob(t, iperf, nil)
	b.note("iperf3 server as the job (exposed port)", "job", nobody, iperf...)
	b.startInJob(t, []string{b.Roles, "0.0.0.0:" + jobPingPort}, []string{roleEnv + "=pingserver"})
	b.note("ping-pong server as the job (exposed port)", "job", nobody, roleEnv+"=pingserver", b.Roles, "0.0.0.0:"+jobPingPort)
	waitFile(t, out, 10*time.Second, "Server listening")
	b.waitPing(t, "cluster → job", b.inNS(b.Topo.Svc), nstest.PodIP+":"+jobPingPort, 20*time.Second)
}

// startTunnel starts "meshlaunch tunnel" as nobody in node with -L to
// the Service's servers and -R from the pod's exposed ports to the node's
// servers on 127.0.0.1, and waits until both directions carry a ping.
func (b *bench) startTunnel(t *testing.T) {
	t.Helper()
	argv := []string{b.Bin, "tunnel", "--server", b.Ingress.URL, "--ca-file", b.Ingress.CAFile, "--token-file", b.Token,
		"-L", "127.0.0.1:" + localIperfPort + ":" + nstest.ServiceIP + ":" + iperfPort,
		"-L", "127.0.0.1:" + localPingPort + ":" + nstest.ServiceIP + ":" + pingPort,
		"-R", revIperfPort + ":127.0.0.1:" + iperfPort,
		"-R", revPingPort + ":127.0.0.1:" + pingPort,
		"--pprof-addr", tunnelPprof}
	opts := launcherOpts(0)
	opts.User = nobody
	b.tunnel = b.Topo.Start(t, b.Topo.Node, opts, argv...)
	b.note("tunnel", "node", nobody, argv...)
	waitExe(t, b.tunnel.Pid(), "/meshlaunch")
	for _, port := range []string{revIperfPort, revPingPort} {
		waitStderr(t, b.tunnel, 20*time.Second, "reverse port registered", "pod_port="+port)
	}
	b.waitPing(t, "tunnel -L", b.inNS(b.Topo.Node), "127.0.0.1:"+localPingPort, 20*time.Second)
	b.waitPing(t, "tunnel -R", b.inNS(b.Topo.Svc), nstest.PodIP+":"+revPingPort, 20*time.Second)
}

// userNS is a user and network namespace created by nobody in node and
// connected by slirp4netns or pasta; na says why it is not available.
type userNS struct {
	holder *nstest.Proc // "sleep" in the namespaces
	helper *nstest.Proc // slirp4netns or pasta
	na     string
}

// enter is the prefix that runs a command as nobody inside u.
func (u userNS) enter() []string {
	return []string{"nsenter", "-t", strconv.Itoa(u.holder.Pid()), "-U", "-n", "--preserve-credentials"}
}

// startUserNS creates the namespaces (as a rootless container engine
// does, with unshare --map-root-user) and connects them with helper,
// whose argv ends with the holder's pid. It returns a userNS with na set
// instead of failing when the helper is missing or does not work here.
func (b *bench) startUserNS(t *testing.T, name, pkg string, helper func(pid string) []string, dst string) userNS {
	t.Helper()
	if _, err := exec.LookPath(helper("0")[0]); err != nil {
		return userNS{na: fmt.Sprintf("%s not installed (apt-get install %s)", helper("0")[0], pkg)}
	}
	holderArgv := []string{"unshare", "--user", "--net", "--map-root-user", "sleep", "infinity"}
	u := userNS{holder: b.Topo.Start(t, b.Topo.Node, nstest.ProcOpts{User: nobody}, holderArgv...)}
	b.note(name+": the user namespace", "node", nobody, holderArgv...)
	if err := waitOwnNetNS(u.holder.Pid(), 5*time.Second); err != nil {
		return userNS{na: "unshare --user --net: " + err.Error()}
	}
	argv := helper(strconv.Itoa(u.holder.Pid()))
	u.helper = b.Topo.Start(t, b.Topo.Node, nstest.ProcOpts{}, append(b.asNobodyWithTun(t), argv...)...)
	b.note(name+" (PID: the namespace's sleep)", "node", nobody+", private /dev/net/tun 0666", helper("PID")...)
	run := b.inUserNS(u)
	deadline := time.Now().Add(15 * time.Second)
	for {
		stdout, stderr, code := run(t, []string{b.Roles, dst, "1", "0"}, []string{roleEnv + "=pingclient"}, 20*time.Second)
		if code == 0 {
			return u
		}
		select {
		case <-u.helper.Done():
			return userNS{na: fmt.Sprintf("%s exited: %s", name, lastLine(u.helper.Stderr()+u.helper.Stdout()))}
		default:
		}
		if time.Now().After(deadline) {
			return userNS{na: fmt.Sprintf("no ping to %s within 15 s: %s", dst, lastLine(stderr+stdout))}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *bench) startSlirp(t *testing.T) {
	t.Helper()
	b.slirp = b.startUserNS(t, "slirp4netns", "slirp4netns", func(pid string) []string {
		return []string{"slirp4netns", "--configure", "--mtu=" + slirpMTU, pid, "tap0"}
	}, nstest.NodeIP+":"+pingPort)
}

// startPasta: this passt (Debian 12's 2023-03 snapshot) copies the node's
// address into the namespace by default, where 198.18.0.2 would then be
// local; -a/-n/-g give it slirp4netns's addresses instead, so both reach
// the node's 198.18.0.2 through their tap path. IPv4 only (as
// slirp4netns's default), no port forwarding.
func (b *bench) startPasta(t *testing.T) {
	t.Helper()
	b.pasta = b.startUserNS(t, "pasta", "passt", func(pid string) []string {
		return []string{"pasta", "-f", "-4", "--config-net", "-a", pastaAddr, "-n", pastaPrefixBits, "-g", pastaGateway,
			"-t", "none", "-u", "none", "-T", "none", "-U", "none", pid}
	}, nstest.NodeIP+":"+pingPort)
}

// runner runs argv (with env added) somewhere and returns its output.
type runner func(t *testing.T, argv, env []string, timeout time.Duration) (stdout, stderr string, code int)

// inNS runs as nobody in one of the topology's namespaces.
func (b *bench) inNS(ns string) runner {
	return func(t *testing.T, argv, env []string, timeout time.Duration) (string, string, int) {
		t.Helper()
		return b.Topo.Run(t, ns, nstest.ProcOpts{User: nobody, Env: env, Timeout: timeout}, argv...)
	}
}

// inUserNS runs as nobody (root of the user namespace) inside u.
func (b *bench) inUserNS(u userNS) runner {
	return func(t *testing.T, argv, env []string, timeout time.Duration) (string, string, int) {
		t.Helper()
		return b.Topo.Run(t, b.Topo.Node, nstest.ProcOpts{User: nobody, Env: env, Timeout: timeout}, append(u.enter(), argv...)...)
	}
}

// waitPing retries one ping-pong round trip through run until it works.
func (b *bench) waitPing(t *testing.T, what string, run runner, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		stdout, stderr, code := run(t, []string{b.Roles, addr, "1", "0"}, []string{roleEnv + "=pingclient"}, 20*time.Second)
		if code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no ping-pong with %s within %v (exit %d): %s%s", what, addr, timeout, code, stdout, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitExe waits until pid runs a program whose path ends with suffix (the
// wrappers before it exec it under the same pid).
func waitExe(t *testing.T, pid int, suffix string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && strings.HasSuffix(exe, suffix) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d runs %q (%v), want …%s", pid, exe, err, suffix)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitOwnNetNS waits until pid is in a network namespace other than ours
// and its parent's (unshare has run).
func waitOwnNetNS(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	parent, err := nsInode(os.Getpid())
	if err != nil {
		return err
	}
	for {
		ino, err := nsInode(pid)
		if err != nil {
			return err
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if ino != parent && strings.HasSuffix(exe, "/sleep") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d did not reach its own namespaces within %v", pid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func nsInode(pid int) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		return 0, fmt.Errorf("netns of %d: %w", pid, err)
	}
	return st.Ino, nil
}

// waitOutput waits until p's stdout holds every one of want.
func waitOutput(t *testing.T, p *nstest.Proc, timeout time.Duration, want ...string) {
	t.Helper()
	waitText(t, p.Name()+" stdout", p.Stdout, p.Done(), timeout, want...)
}

// waitStderr waits until one line of p's stderr holds every one of want.
func waitStderr(t *testing.T, p *nstest.Proc, timeout time.Duration, want ...string) {
	t.Helper()
	lines := func() string {
		for line := range strings.Lines(p.Stderr()) {
			if containsAll(line, want) {
				return line
			}
		}
		return ""
	}
	waitText(t, p.Name()+" stderr", lines, p.Done(), timeout, want...)
}

// waitFile waits until the file at path holds every one of want.
func waitFile(t *testing.T, path string, timeout time.Duration, want ...string) {
	t.Helper()
	read := func() string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	waitText(t, path, read, nil, timeout, want...)
}

func waitText(t *testing.T, what string, read func() string, done <-chan struct{}, timeout time.Duration, want ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		text := read()
		if containsAll(text, want) {
			return
		}
		select {
		case <-done:
			t.Fatalf("%s: exited before printing %q:\n%s", what, want, text)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q within %v:\n%s", what, want, timeout, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// lastLine is the last non-empty line of s, for one-line reasons.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "Failed to send") {
			return l
		}
	}
	return "(no output)"
}
