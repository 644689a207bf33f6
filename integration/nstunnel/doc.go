// Package nstunnel is the namespace tier of `meshlaunch tunnel`'s tests
// (docs/tunnel.md): the real meshlaunch binary runs as "meshlaunch
// sidecar" in the pod namespace of an nstest topology and as "meshlaunch
// tunnel" in the node namespace, both as user nobody with no capabilities
// (the tunnel needs no /dev/net/tun), the tunnel reaching the sidecar only
// through nginx as the Ingress. Clients are curl, dig and nstest roles in
// the node and svc namespaces; two helper roles of this package's own
// test binary, a TCP relay that can reset its connections and a server
// that answers the PROXY protocol line it received, stand in for a broken
// carrier and for a proxy-protocol-aware service.
//
// Each test builds its own topology (nstest.MeshCluster), so tests share
// nothing but the meshlaunch binary built in TestMain. The tests need root and skip otherwise;
// the package has no code outside its tests.
package nstunnel
