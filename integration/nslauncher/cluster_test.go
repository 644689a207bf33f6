package nslauncher

import (
	"testing"

	"github.com/meshlaunch/meshlaunch/integration/nstest"
)

const (
	nobody    = "nobody"
	nobodyUID = "65534"
	// Ports the sidecar exposes; the job listens on them.
	jobTCPPort = nstest.ExposedTCP
	jobUDPPort = nstest.ExposedUDP
)

// cluster is an nstest.MeshCluster with a ready sidecar (routes to the
// Service and cluster CIDRs, exposing 9000/tcp and 9001/udp) and a copy
// of the test binary, Roles, for nstest roles run as jobs: $NSTEST_ROLE
// picks the role. The job asks for "web" (nstest.WebName) and the pod's
// search path completes it.
type cluster struct {
	*nstest.MeshCluster
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return &cluster{nstest.NewMeshCluster(t, nstest.MeshOpts{ // skips unless root
		Meshlaunch: meshlaunchBin,
		Roles:      "nstest-roles",
	})}
}
