// Package nssidecar is the namespace tier of the sidecar's tests
// (docs/design.md, "How it is checked"): the real meshlaunch binary runs
// as "meshlaunch sidecar" in the pod namespace of an nstest topology, as
// user nobody with no capabilities, behind nginx as the Ingress; the job
// is meshtest's in-process peer, whose websocket leaves from the node
// namespace through nstest.DialerIn. The tests need root and skip
// otherwise; the package has no code outside its tests.
package nssidecar
