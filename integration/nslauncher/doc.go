// Package nslauncher is the namespace tier of `meshlaunch run`'s tests
// (docs/design.md, "How it is checked"): the real meshlaunch binary runs
// as "meshlaunch sidecar" in the pod namespace of an nstest topology and
// as "meshlaunch run" in the node namespace, both as user nobody with no
// capabilities, the launcher reaching the sidecar only through nginx as
// the Ingress (and optionally tinyproxy). Jobs are shell commands (curl,
// getent) or nstest roles run from a copy of the test binary.
//
// Each test builds its own topology, so tests share nothing but the
// binary built in TestMain. The tests need root and skip otherwise; the
// package has no code outside its tests.
//
// The host's /dev/net/tun (mode 0600 on CI) is never changed: each
// launcher runs in a private mount namespace with a fresh node of the same
// device at the mode the test wants, 0666, or 0600 to check the launcher's
// error (internal/tundev), so test packages running in parallel never see
// each other's mode.
package nslauncher
