# meshlaunch pre-exec for interLink's full-mesh mode (docs/interlink.md).
#
# The virtual kubelet executes this file as a Go template instead of its
# default mesh.sh (Network.MeshScriptTemplatePath), with its mesh script
# data: .RandomPassword, .IngressEndpoint, .ServiceCIDR and .PodCIDRCluster
# are used here. The result goes to the top of the pod's
# slurm-job.vk.io/pre-exec annotation, and the SLURM plugin writes that into
# job.slurm after the #SBATCH lines, just before the line that runs job.sh.
#
# The first time through, outside the mesh, it runs job.slurm again inside
# `meshlaunch run` and exits with its status. The second time, inside,
# MESHLAUNCH_POD_IP (set by the launcher) is present and this block does
# nothing, so job.sh and everything after it run with the pod's IP, the
# cluster's routes and DNS. Nothing is downloaded, no key or overlay
# address is configured, nothing waits with sleep: the launcher starts the
# job once the tunnel is up, or fails with one line saying why.
if [ -z "${MESHLAUNCH_POD_IP:-}" ]; then
	# One static binary, installed on the node by the site (or shipped with
	# the job and put in PATH). It is never downloaded at job start.
	ml_bin=$(command -v meshlaunch) || {
		echo "meshlaunch pre-exec: meshlaunch is not installed on $(hostname) (PATH=$PATH); the site installs it, or the job ships it" >&2
		exit 127
	}
	# Optional: the sha256 of the binary the site installed; the job stops if
	# the file on the node differs.
	ml_sha256=""
	if [ -n "$ml_sha256" ] && ! printf '%s  %s\n' "$ml_sha256" "$ml_bin" | sha256sum --check --status --strict -; then
		echo "meshlaunch pre-exec: $ml_bin does not have the pinned sha256 $ml_sha256" >&2
		exit 126
	fi
	# The shadow pod's secret: node-local, readable by this user only,
	# removed when the job ends.
	ml_dir=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/meshlaunch.XXXXXXXX") || exit 1
	if ! (umask 077 && printf '%s\n' '{{.RandomPassword}}' >"$ml_dir/token"); then
		rm -rf "$ml_dir"
		exit 1
	fi
	# Proxy, CA bundle and the like come from the environment:
	# HTTPS_PROXY/NO_PROXY, MESHLAUNCH_CA_FILE, MESHLAUNCH_WAIT, ...
	"$ml_bin" run --server 'wss://{{.IngressEndpoint}}' --token-file "$ml_dir/token" \
		--route '{{.ServiceCIDR}}' --route '{{.PodCIDRCluster}}' \
		-- "${BASH:-/bin/bash}" "$0" "$@"
	ml_status=$?
	rm -rf "$ml_dir"
	exit "$ml_status"
fi
