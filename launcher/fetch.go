package launcher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

// errUnauthorized is final: retrying a wrong secret does not help.
var errUnauthorized = errors.New("the sidecar refused the credential (401): the secret differs from the sidecar's")

// fetchConfig asks the sidecar for the job's configuration, retrying with
// backoff until ctx ends; a refused credential fails at once.
func fetchConfig(ctx context.Context, rc RunConfig, id keys) (meshapi.JobConfig, error) {
	hc, err := wsproxy.NewHTTPClient(rc.Server, rc.HTTP)
	if err != nil {
		return meshapi.JobConfig{}, err
	}
	u := wsproxy.JoinPath(rc.Server, meshapi.ConfigPath)
	u.Scheme = strings.Replace(u.Scheme, "ws", "http", 1)
	delay := 100 * time.Millisecond
	for {
		jc, err := getConfig(ctx, hc, u.String(), id)
		var fe *finalError
		if err == nil || errors.Is(err, errUnauthorized) || errors.As(err, &fe) {
			return jc, err
		}
		var pe *wsproxy.ProxyError
		if errors.As(err, &pe) && pe.AuthRequired() {
			return jc, fmt.Errorf("launcher: %w (check the credentials in HTTPS_PROXY)", pe)
		}
		if isTLSFailure(err) {
			return jc, fmt.Errorf("launcher: TLS to %s: %w (pass --ca-file with the CA that signed it; --insecure only for tests)", u.Host, err)
		}
		rc.Logger.Warn("sidecar not reachable yet; retrying", "url", u.Redacted(), "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return jc, fmt.Errorf("launcher: get configuration from %s: %w (last error: %w)", u.Redacted(), ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

func getConfig(ctx context.Context, hc *http.Client, url string, id keys) (meshapi.JobConfig, error) {
	var jc meshapi.JobConfig
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return jc, err
	}
	req.Header = id.header()
	req.Header.Set("Authorization", "Bearer "+id.credential)
	resp, err := hc.Do(req)
	if err != nil {
		return jc, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return jc, errUnauthorized
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return jc, refusal(resp.StatusCode, strings.TrimSpace(string(b)), id)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&jc); err != nil {
		return jc, fmt.Errorf("decode configuration: %w", err)
	}
	if !jc.Address.IsValid() || jc.MTU < 1280 {
		return jc, fmt.Errorf("configuration without an address or with MTU %d", jc.MTU)
	}
	return jc, nil
}

// isTLSFailure reports a certificate the client will not trust: retrying
// does not change it.
func isTLSFailure(err error) bool {
	var cve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cve) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// CheckServer asks the sidecar for the configuration once and reports
// what stands in the way: reachability, the proxy, TLS, the credential.
func CheckServer(ctx context.Context, rc RunConfig) Finding {
	f := Finding{Name: "sidecar " + rc.Server.Redacted()}
	id, err := rc.identity()
	if err != nil {
		f.Detail = err.Error()
		return f
	}
	hc, err := wsproxy.NewHTTPClient(rc.Server, rc.HTTP)
	if err != nil {
		f.Detail = err.Error()
		return f
	}
	u := wsproxy.JoinPath(rc.Server, meshapi.ConfigPath)
	u.Scheme = strings.Replace(u.Scheme, "ws", "http", 1)
	jc, err := getConfig(ctx, hc, u.String(), id)
	if err != nil {
		f.Detail = err.Error()
		return f
	}
	f.OK = true
	f.Detail = fmt.Sprintf("pod IP %s, routes %v, MTU %d", jc.Address, jc.Routes, jc.MTU)
	return f
}

// finalError is a refusal of the configuration that retrying cannot
// change.
type finalError struct{ reason string }

func (e *finalError) Error() string { return "launcher: " + e.reason }

// refusal explains a configuration request the sidecar refused.
func refusal(status int, body string, id keys) error {
	switch {
	case status == http.StatusBadRequest && !id.explicit && strings.Contains(body, meshapi.PeerHeader):
		return &finalError{"the sidecar serves explicit peers (--peer): run with --private-key-file and a key whose public key is one of its --peer"}
	case status == http.StatusForbidden && id.explicit:
		return &finalError{fmt.Sprintf("the sidecar does not list this job's public key %s as a --peer; add it there, or use the key it lists", id.private.Public())}
	}
	return fmt.Errorf("%d %s: %s", status, http.StatusText(status), body)
}
