package nstest

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"
)

// IngressServerName is the TLS name of the Ingress certificate. Nothing
// resolves it; clients use the IP SAN (EdgeNodeIP) or pin the name.
const IngressServerName = "mesh.test"

// IngressOpts configures StartIngress.
type IngressOpts struct {
	// Upstream is the cluster host:port nginx proxies to; "" means
	// PodIP:8080.
	Upstream string
	// IdleTimeout is nginx's proxy_read_timeout and proxy_send_timeout:
	// how long a proxied connection, websocket included, may stay silent
	// before nginx closes it. 0 means 60 s, nginx's default.
	IdleTimeout time.Duration
	// BufferSize is nginx's proxy_buffer_size, which is also the size of
	// the buffers nginx copies an upgraded connection through; "" keeps
	// nginx's default (4k).
	BufferSize string
	// Certs replaces the generated certificate, for example with one the
	// client must refuse; nil generates a CA and a certificate for
	// IngressServerName and EdgeNodeIP.
	Certs *CertFiles
}

// Ingress is nginx in the edge namespace, listening on EdgeNodeIP:443
// (TLS) and :80, proxying everything, upgrades included, to the upstream.
type Ingress struct {
	URL      string // "wss://198.18.0.1", verified with CAFile
	PlainURL string // "ws://198.18.0.1"
	CAFile   string // PEM CA for URL, readable by every user
	Certs    *CertFiles
	ErrorLog string // nginx's error log
	Proc     *Proc  // the nginx master
}

// StartIngress starts nginx in the edge namespace and waits until both
// ports accept connections. It skips t if nginx is not installed.
func (tp *Topology) StartIngress(t testing.TB, opts IngressOpts) *Ingress {
	t.Helper()
	bin := lookPathOrSkip(t, "nginx", "nginx-light")
	dir := SharedDir(t, "nstest-nginx-")
	certs := opts.Certs
	if certs == nil {
		var err error
		if certs, err = GenerateCerts(dir, IngressServerName, netip.MustParseAddr(EdgeNodeIP)); err != nil {
			t.Fatalf("nstest: ingress certificates: %v", err)
		}
	}
	conf, err := writeNginxConf(dir, opts, certs)
	if err != nil {
		t.Fatalf("nstest: ingress: %v", err)
	}
	ing := &Ingress{
		URL:      "wss://" + EdgeNodeIP,
		PlainURL: "ws://" + EdgeNodeIP,
		CAFile:   certs.CAFile,
		Certs:    certs,
		ErrorLog: filepath.Join(dir, "error.log"),
	}
	ing.Proc = tp.Start(t, tp.Edge, ProcOpts{}, bin, "-p", dir, "-c", conf, "-e", ing.ErrorLog)
	t.Cleanup(func() { logFileIfFailed(t, "nginx error log", ing.ErrorLog) })
	tp.WaitTCP(t, tp.Edge, EdgeNodeIP+":443", 10*time.Second)
	tp.WaitTCP(t, tp.Edge, EdgeNodeIP+":80", 10*time.Second)
	return ing
}

// nginxConfTemplate: workers run as nobody (the master, root, reads the
// key and creates the temp directories for them); every path is inside
// the test's directory. The Connection header follows Upgrade through the
// map nginx documents for websocket proxying, so plain requests are not
// sent "Connection: upgrade".
var nginxConfTemplate = template.Must(template.New("nginx.conf").Parse(`daemon off;
user nobody nogroup;
worker_processes 1;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log info;
events { worker_connections 1024; }
http {
	access_log {{.Dir}}/access.log;
	client_body_temp_path {{.Dir}}/client_body;
	proxy_temp_path {{.Dir}}/proxy;
	fastcgi_temp_path {{.Dir}}/fastcgi;
	uwsgi_temp_path {{.Dir}}/uwsgi;
	scgi_temp_path {{.Dir}}/scgi;
	map $http_upgrade $connection_upgrade { default upgrade; "" close; }
	server {
		listen {{.Listen}}:443 ssl;
		listen {{.Listen}}:80;
		server_name {{.ServerName}};
		ssl_certificate {{.Certs.CertFile}};
		ssl_certificate_key {{.Certs.KeyFile}};
		location / {
			proxy_pass http://{{.Upstream}};
			proxy_http_version 1.1;
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $connection_upgrade;
			proxy_set_header Host $host;
			proxy_read_timeout {{.Idle}}s;
			proxy_send_timeout {{.Idle}}s;
			proxy_buffering off;
			{{- if .BufferSize}}
			proxy_buffer_size {{.BufferSize}};
			proxy_buffers 4 {{.BufferSize}};
			{{- end}}
		}
	}
}
`))

// writeNginxConf renders nginx.conf into dir and returns its path.
func writeNginxConf(dir string, opts IngressOpts, certs *CertFiles) (string, error) {
	idle := opts.IdleTimeout
	if idle == 0 {
		idle = 60 * time.Second
	}
	if idle < time.Second {
		return "", fmt.Errorf("idle timeout %v: nginx counts whole seconds", idle)
	}
	var b strings.Builder
	err := nginxConfTemplate.Execute(&b, map[string]any{
		"Dir":        dir,
		"Listen":     EdgeNodeIP,
		"ServerName": IngressServerName,
		"Certs":      certs,
		"Upstream":   cmp.Or(opts.Upstream, PodIP+":8080"),
		"Idle":       int(idle / time.Second),
		"BufferSize": opts.BufferSize,
	})
	if err != nil {
		return "", fmt.Errorf("render nginx.conf: %w", err)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write nginx.conf: %w", err)
	}
	return path, nil
}

// logFileIfFailed logs the tail of a file when t has failed.
func logFileIfFailed(t testing.TB, what, path string) {
	if t.Failed() {
		t.Logf("nstest: %s (%s) tail:\n%s", what, path, tail([]byte(readString(path))))
	}
}
