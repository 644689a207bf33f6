// Package bench is `make bench`: meshlaunch's side-by-side performance
// benchmark (issue 7). It builds an nstest topology (a Service, the shadow
// pod with "meshlaunch sidecar" as nobody, nginx as the Ingress, a remote
// node where "meshlaunch run" and "meshlaunch tunnel" run as nobody) and
// measures, in one run and in alternating order, iperf3 throughput and a
// 1-byte TCP ping-pong through every path a user could pick: the loopback
// and veth limits, slirp4netns and pasta, the mesh both ways, the host
// NAT, tunnel -L and -R; then the sidecar's and the launcher's memory, the
// CPU cost per GiB and the start-up time of "meshlaunch run -- true"; last,
// CPU profiles of the meshlaunch processes on each of meshlaunch's paths
// (their --pprof-addr), summarised by category and top functions.
// It writes docs/benchmarks.md and docs/benchmarks.svg and prints the
// table.
//
// It is a test only so that it can reuse the namespace harness: it runs
// only with MESHLAUNCH_BENCH=1, as root, and skips at once otherwise:
//
//	MESHLAUNCH_BENCH=1 go test -count=1 -timeout 30m -v -run TestBench ./integration/bench/
//
// MESHLAUNCH_BENCH_REPS (default 3) and MESHLAUNCH_BENCH_SECONDS (default
// 5) change the number of runs per measurement and the length of each
// iperf3 run; MESHLAUNCH_BENCH_PATHS=KEY,... measures only those paths
// (prints the tables, writes no docs); MESHLAUNCH_BENCH_PROFILES=DIR keeps
// the raw CPU profiles there. The package has no code outside its tests.
package bench
