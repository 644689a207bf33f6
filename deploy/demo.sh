#!/usr/bin/env bash
# meshlaunch demo: a simulated cluster and a remote job joined to it, on this
# machine, in network namespaces (needs root to build them; the sidecar and
# the job run as the unprivileged user nobody).
#
#   cluster:  svc   10.96.0.10  a Service (nginx) and cluster DNS (dnsmasq)
#             pod   10.244.1.5  the shadow pod: meshlaunch sidecar, as nobody
#             edge  10.244.0.2 / 198.18.0.1  the Ingress (nginx, websockets)
#   site:     node  198.18.0.2  the remote node: meshlaunch run, as nobody;
#                               it reaches the cluster only through the Ingress
#
# Everything is removed on exit. Usage: deploy/demo.sh [path/to/meshlaunch]
set -euo pipefail

BIN=$(readlink -f "${1:-bin/meshlaunch}")
P=mldemo$$
DIR=$(mktemp -d /tmp/meshlaunch-demo.XXXXXX)
chmod 0755 "$DIR"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ns() { local n=$1; shift; ip netns exec "$P-$n" "$@"; }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all "$@"; }

cleanup() {
	# Everything the demo started lives in its namespaces.
	for n in svc pod edge node br; do
		ip netns pids "$P-$n" 2>/dev/null | xargs -r kill 2>/dev/null || true
	done
	sleep 0.3
	for n in svc pod edge node br; do
		ip netns pids "$P-$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		ip netns del "$P-$n" 2>/dev/null || true
	done
	rm -rf "/etc/netns/$P-pod" "$DIR"
}
trap cleanup EXIT

for tool in ip setpriv unshare nginx dnsmasq curl openssl; do
	command -v "$tool" >/dev/null || { echo "demo: $tool is missing (make demo installs it)" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "demo: no binary at $BIN (make build)" >&2; exit 1; }

say "building the cluster and the remote node in network namespaces"
for n in svc pod edge node br; do ip netns add "$P-$n"; ns "$n" ip link set lo up; done
ns br ip link add br0 type bridge
ns br ip link set br0 up
i=0
for n in svc pod edge; do
	i=$((i + 1))
	ns br ip link add "v$i" type veth peer name eth0 netns "$P-$n"
	ns br ip link set "v$i" master br0 up
	ns "$n" ip link set eth0 up
done
ns svc ip addr add 10.244.0.10/16 dev eth0
ns svc ip addr add 10.96.0.10/32 dev lo
ns pod ip addr add 10.244.1.5/16 dev eth0
ns pod ip route add 10.96.0.0/16 via 10.244.0.10
ns edge ip addr add 10.244.0.2/16 dev eth0
ns edge ip link add eth1 type veth peer name eth0 netns "$P-node"
ns edge ip addr add 198.18.0.1/24 dev eth1
ns edge ip link set eth1 up
ns node ip addr add 198.18.0.2/24 dev eth0
ns node ip link set eth0 up
ns node ip route add default via 198.18.0.1
mkdir -p "/etc/netns/$P-pod"
printf 'nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n' \
	>"/etc/netns/$P-pod/resolv.conf"

say "the cluster: a Service at 10.96.0.10 (web.default.svc.cluster.local)"
cat >"$DIR/svc.conf" <<CONF
daemon off; pid $DIR/svc.pid; error_log $DIR/svc.err; events {}
http { access_log off; client_body_temp_path $DIR; proxy_temp_path $DIR; fastcgi_temp_path $DIR; uwsgi_temp_path $DIR; scgi_temp_path $DIR;
  server { listen 10.96.0.10:80; location / { return 200 "hello from the cluster Service; it sees you as \$remote_addr\n"; } } }
CONF
ns svc nginx -c "$DIR/svc.conf" -e "$DIR/svc.err" >/dev/null 2>&1 &
ns svc dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --pid-file="$DIR/dns.pid" \
	--listen-address=10.96.0.10 --bind-interfaces --host-record=web.default.svc.cluster.local,10.96.0.10 >/dev/null 2>&1 &

say "the shadow pod: meshlaunch sidecar as nobody, no capabilities, no /dev/net/tun"
"$BIN" token >"$DIR/token"
chmod 0644 "$DIR/token"
ns pod setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
	"$BIN" sidecar --listen 10.244.1.5:8080 --token-file "$DIR/token" --pod-ip 10.244.1.5 \
	--route 10.96.0.0/16 --route 10.244.0.0/16 --expose 9000 >"$DIR/sidecar.log" 2>&1 &

say "the Ingress: nginx on 198.18.0.1 terminates TLS and proxies websockets to the pod"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=mesh.demo \
	-addext "subjectAltName=IP:198.18.0.1" -keyout "$DIR/tls.key" -out "$DIR/tls.crt" 2>/dev/null
chmod 0644 "$DIR/tls.crt"
cat >"$DIR/edge.conf" <<CONF
daemon off; pid $DIR/edge.pid; error_log $DIR/edge.err; events {}
http { access_log off; client_body_temp_path $DIR; proxy_temp_path $DIR; fastcgi_temp_path $DIR; uwsgi_temp_path $DIR; scgi_temp_path $DIR;
  map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
  server { listen 198.18.0.1:443 ssl; ssl_certificate $DIR/tls.crt; ssl_certificate_key $DIR/tls.key;
    location / { proxy_pass http://10.244.1.5:8080; proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade; proxy_set_header Connection \$connection_upgrade;
      proxy_read_timeout 60s; proxy_buffering off; proxy_buffer_size 64k; proxy_buffers 4 64k; } } }
CONF
ns edge nginx -c "$DIR/edge.conf" -e "$DIR/edge.err" >/dev/null 2>&1 &
for _ in $(seq 50); do ns node curl -sf --cacert "$DIR/tls.crt" -o /dev/null https://198.18.0.1/readyz && break; sleep 0.1; done

say "the remote node cannot reach the cluster by itself:"
ns node curl -s -m 2 http://10.96.0.10/ || echo "   (no route to 10.96.0.10 from the node: as expected)"

say "meshlaunch run on the remote node, as nobody, joins a job to the pod network"
# The job: reaches the Service by its cluster name, serves port 8080 (nginx
# as the job's server), and waits until the cluster has reached it.
cat >"$DIR/job.conf" <<CONF
daemon off; pid $DIR/jobtmp/job.pid; error_log $DIR/jobtmp/error.log; events {}
http { access_log off; client_body_temp_path $DIR/jobtmp; proxy_temp_path $DIR/jobtmp; fastcgi_temp_path $DIR/jobtmp; uwsgi_temp_path $DIR/jobtmp; scgi_temp_path $DIR/jobtmp;
  server { listen 9000; location / { return 200 "hello from the remote job; it sees you as \$remote_addr\n"; } } }
CONF
mkdir -p "$DIR/jobtmp" "$DIR/dev"
chmod 0777 "$DIR/jobtmp" "$DIR"
cat >"$DIR/job.sh" <<'JOB'
echo "job: I run as uid $(id -u), with the pod IP $MESHLAUNCH_POD_IP"
echo "job: curl http://web/ (a cluster name, resolved through the tunnel with the pod's search path):"
echo -n "     "; curl -s -m 5 http://web/
nginx -c "$1/job.conf" -e "$1/jobtmp/error.log" &
echo "job: serving port 9000; waiting for the cluster to call"
for _ in $(seq 100); do [ -e "$1/called" ] && break; sleep 0.1; done
echo "job: done, exiting with status 7"
exit 7
JOB
# /dev/net/tun is 0600 on some machines: the demo gives nobody its own 0666
# node in a private mount namespace instead of changing the machine's.
ns node unshare --mount --propagation private sh -c \
	'mount -t tmpfs tundev "$0" && mknod "$0/tun" c 10 200 && chmod 0666 "$0/tun" && mount --bind "$0/tun" /dev/net/tun && exec "$@"' "$DIR/dev" \
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
	"$BIN" run --server wss://198.18.0.1 --ca-file "$DIR/tls.crt" --token-file "$DIR/token" -- sh "$DIR/job.sh" "$DIR" &
RUN=$!

say "a client in the cluster calls the job at the pod IP (10.244.1.5:9000)"
got=""
for _ in $(seq 100); do
	got=$(ns svc curl -s -m 1 http://10.244.1.5:9000/ || true)
	[ -n "$got" ] && break
	sleep 0.1
done
echo "   cluster client got: ${got:-nothing}"
touch "$DIR/called"
set +e
wait "$RUN"
code=$?
set -e
say "meshlaunch run exited with $code (the job's status)"
[ -n "$got" ] || { echo "demo: FAILED: the cluster could not reach the job"; cat "$DIR/sidecar.log"; exit 1; }
[ "$code" = 7 ] || { echo "demo: FAILED: expected the job's status 7"; cat "$DIR/sidecar.log"; exit 1; }
echo "demo: ok"
