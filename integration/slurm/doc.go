// Package slurm is meshlaunch's end-to-end test under a real SLURM
// (docs/hpc.md): a one-node cluster from Debian's slurm-wlm and munge runs
// batch jobs that join the simulated Kubernetes cluster of nstest through
// "meshlaunch run".
//
// slurmctld, slurmd and munged run inside the topology's node namespace,
// the remote HPC node: there, "localhost" is the node's own loopback, and
// the Ingress at 198.18.0.1 is reachable, as it is not from the host's
// namespace. slurmd runs with /dev/net/tun at mode 0666 in a private mount
// namespace (internal/tundev), as a site grants it, and jobs inherit it.
// Jobs are submitted with sbatch by user nobody and run as nobody.
//
// The SLURM test runs only with MESHLAUNCH_E2E_SLURM=1 (make e2e-slurm),
// as root, with slurm-wlm and munge installed; otherwise it skips at once.
// The template tests (interLink's templates in deploy/interlink) run
// always. The package has no code outside its tests.
package slurm
