// Package manifest renders the Kubernetes objects of one shadow pod: a
// Secret with the shared secret, a Deployment running `meshlaunch sidecar`
// with no privileges, a ClusterIP Service and an Ingress for the websocket
// (ingress-nginx, optionally TLS from cert-manager). `meshlaunch manifest`
// is a thin wrapper around Render; docs/kubernetes.md explains the objects.
//
// Render writes YAML from a text/template, not from the Kubernetes API
// types, so the binary does not carry k8s.io/api. Every value that reaches
// the template has been validated (names, host, ports, CIDRs, image
// reference) and every string is emitted double-quoted, so options cannot
// change the document's structure. The tests decode every document
// strictly into the k8s.io/api types and check the security settings, and
// keep the committed examples in deploy/kubernetes/ equal to Render's
// output (regenerate them with `go generate ./manifest/`).
package manifest

//go:generate go test -run ^TestCommittedExamples$ . -args -update
