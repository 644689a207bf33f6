package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshlaunch/meshlaunch/hostnat"
	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// Host network modes.
const (
	HostNetworkNAT  = "nat"
	HostNetworkNone = "none"
)

// hostTunName is the host-NAT interface inside the namespace.
const hostTunName = "ml1"

// RunConfig is what `meshlaunch run` needs: the sidecar's URL and the
// secret; everything else the sidecar tells.
type RunConfig struct {
	Server *url.URL // ws:// or wss:// with the sidecar's path prefix
	Secret string
	// PrivateKey is the job's own WireGuard key, for a sidecar with
	// explicit peers (its public key is one of the sidecar's --peer);
	// zero derives the key from Secret.
	PrivateKey identity.PrivateKey
	// Routes are added to the sidecar's.
	Routes []netip.Prefix
	// Publish forwards host ports into the job.
	Publish []Publish
	// HostNetwork is HostNetworkNAT (default) or HostNetworkNone.
	HostNetwork string
	// HostLoopback lets the job reach the host's 127.0.0.1 at
	// hostnat.LoopbackAddr.
	HostLoopback bool
	// HTTP configures TLS, proxies and dialing towards the sidecar.
	HTTP wsproxy.HTTPOptions
	// Wait bounds the wait for the configuration and the tunnel before the
	// job starts (default 60s).
	Wait time.Duration
	// GiveUpAfter, if set, stops the job (SIGTERM, then SIGKILL after
	// KillGrace) when the tunnel has been down this long while it runs —
	// for example after the sidecar came back with another secret — and
	// Run then reports that. Zero waits for the tunnel forever.
	GiveUpAfter time.Duration
	// KillGrace, Env, Dir and the streams are as in Config.
	KillGrace             time.Duration
	Env                   []string
	Dir                   string
	Stdin, Stdout, Stderr *os.File
	ForwardSignals        bool
	// Status, if set, receives one line when the tunnel is up (stderr in
	// cmd, unless --quiet); the job's own output is never touched.
	Status io.Writer
	Logger *slog.Logger
}

func (rc *RunConfig) defaults() error {
	if rc.Server == nil {
		return errors.New("launcher: no server URL")
	}
	if rc.Wait <= 0 {
		rc.Wait = 60 * time.Second
	}
	if rc.HostNetwork == "" {
		rc.HostNetwork = HostNetworkNAT
	}
	if rc.HostNetwork != HostNetworkNAT && rc.HostNetwork != HostNetworkNone {
		return fmt.Errorf("launcher: host network %q: want nat or none", rc.HostNetwork)
	}
	if len(rc.Publish) > 0 && rc.HostNetwork != HostNetworkNAT {
		return errors.New("launcher: --publish needs --host-network nat (published ports enter through it)")
	}
	if rc.Logger == nil {
		rc.Logger = slog.New(slog.DiscardHandler)
	}
	rc.HTTP.Logger = rc.Logger
	return nil
}

// Run joins the job to the mesh and runs argv: it fetches the
// configuration, builds the namespaces, brings the tunnel up, starts the
// job, and returns its exit code once it and everything it started are
// gone. Errors before the job starts are returned with code -1.
func Run(ctx context.Context, rc RunConfig, argv []string) (int, error) {
	if err := rc.defaults(); err != nil {
		return -1, err
	}
	id, err := rc.identity()
	if err != nil {
		return -1, err
	}
	wctx, cancel := context.WithTimeout(ctx, rc.Wait)
	defer cancel()
	jc, err := fetchConfig(wctx, rc, id)
	if err != nil {
		return -1, err
	}
	if id.sidecar, err = rc.sidecarKey(id, jc); err != nil {
		return -1, err
	}
	rc.Logger.Debug("configuration", "address", jc.Address, "routes", jc.Routes, "mtu", jc.MTU)
	s, err := start(ctx, wctx, rc, id, jc, argv)
	if err != nil {
		return -1, err
	}
	defer s.close()
	if rc.Status != nil {
		fmt.Fprintf(rc.Status, "meshlaunch: joined %s as %s (routes %v); starting %s\n",
			rc.Server.Redacted(), jc.Address, namespaceConfig(rc, jc).Routes, argv[0])
	}
	if err := s.job.Go(ctx); err != nil {
		return -1, err
	}
	if rc.GiveUpAfter > 0 {
		stop := s.watchTunnel(rc.GiveUpAfter, rc.Logger)
		defer stop()
	}
	code, err := s.job.Wait()
	if gaveUp := s.gaveUp.Load(); gaveUp != nil && err == nil {
		err = *gaveUp
	}
	return code, err
}

// session is everything a running job holds.
type session struct {
	job  *Job
	mesh *mesh
	nat  *hostnat.NAT
	pubs *publisher

	gaveUp atomic.Pointer[error] // why watchTunnel stopped the job
}

func (s *session) close() {
	s.job.Close()
	if s.pubs != nil {
		s.pubs.close()
	}
	if s.nat != nil {
		s.nat.Close()
	}
	if s.mesh != nil {
		s.mesh.close()
	}
}

// start builds the namespaces and the tunnel; the job waits for Go.
func start(ctx, wctx context.Context, rc RunConfig, id keys, jc meshapi.JobConfig, argv []string) (*session, error) {
	cfg := namespaceConfig(rc, jc)
	job, err := Start(ctx, cfg, argv)
	if err != nil {
		return nil, err
	}
	s := &session{job: job}
	if err := s.attach(wctx, rc, id, jc); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *session) attach(wctx context.Context, rc RunConfig, id keys, jc meshapi.JobConfig) error {
	t, err := newFileTUN(s.job.TUN(), s.job.TunName(), jc.MTU)
	if err != nil {
		return err
	}
	if s.mesh, err = startMesh(rc, id, t, jc.MTU); err != nil {
		return err
	}
	if f := s.job.HostTUN(); f != nil {
		ht, err := newFileTUN(f, hostTunName, jc.MTU)
		if err != nil {
			return err
		}
		if s.nat, err = hostnat.Start(hostnat.Config{TUN: ht, AllowLoopback: rc.HostLoopback, Logger: rc.Logger}); err != nil {
			ht.Close()
			return err
		}
		if s.pubs, err = publish(rc.Publish, s.nat, jc.Address, rc.Logger); err != nil {
			return err
		}
	}
	return s.mesh.waitReady(wctx)
}

// namespaceConfig turns the sidecar's configuration into the namespace's.
func namespaceConfig(rc RunConfig, jc meshapi.JobConfig) Config {
	// The same route twice would make the kernel refuse the second.
	routes := slices.Concat(jc.Routes, rc.Routes)
	slices.SortFunc(routes, netip.Prefix.Compare)
	routes = slices.Compact(routes)
	cfg := Config{
		Addr:        jc.Address,
		MTU:         jc.MTU,
		Routes:      routes,
		ServiceAddr: jc.ServiceAddr,
		DNS: DNS{
			Nameservers: []netip.Addr{jc.DNS.Nameserver},
			Search:      jc.DNS.Search,
			Ndots:       jc.DNS.Ndots,
			Options:     jc.DNS.Options,
		},
		Env: rc.Env, Dir: rc.Dir,
		Stdin: rc.Stdin, Stdout: rc.Stdout, Stderr: rc.Stderr,
		ForwardSignals: rc.ForwardSignals,
		KillGrace:      rc.KillGrace,
		Logger:         rc.Logger,
	}
	if rc.HostNetwork == HostNetworkNAT {
		cfg.HostTun = hostTunName
		cfg.HostRoutes = []netip.Prefix{netip.PrefixFrom(hostnat.LoopbackAddr, 32)}
	}
	return cfg
}

// watchTunnel stops the job when the websocket has been down for limit.
// The returned function stops the watch and waits for it.
func (s *session) watchTunnel(limit time.Duration, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(max(min(limit/4, time.Second), 10*time.Millisecond))
		defer tick.Stop()
		var downSince time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if s.mesh.client.Stats().Connected {
					downSince = time.Time{}
					continue
				}
				if downSince.IsZero() {
					downSince = now
				}
				if now.Sub(downSince) < limit {
					continue
				}
				err := fmt.Errorf("launcher: the tunnel was down for more than %s (--give-up-after; last error: %v); the job was stopped",
					limit, s.mesh.client.LastError())
				s.gaveUp.Store(&err)
				log.Error("tunnel down too long; stopping the job", "after", limit, "err", s.mesh.client.LastError())
				_ = s.job.Signal(syscall.SIGTERM)
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}
