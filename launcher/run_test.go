package launcher

import (
	"net/netip"
	"testing"

	"github.com/meshlaunch/meshlaunch/meshapi"
)

func TestNamespaceConfigMergesRoutes(t *testing.T) {
	p := netip.MustParsePrefix
	jc := meshapi.JobConfig{Address: netip.MustParseAddr("10.244.1.5"), MTU: 65000,
		Routes: []netip.Prefix{p("10.96.0.0/16"), p("10.244.0.0/16")}}
	rc := RunConfig{Routes: []netip.Prefix{p("10.96.0.0/16"), p("192.0.2.0/24")}, HostNetwork: HostNetworkNAT}
	got := namespaceConfig(rc, jc).Routes
	want := []netip.Prefix{p("10.96.0.0/16"), p("10.244.0.0/16"), p("192.0.2.0/24")}
	if len(got) != len(want) {
		t.Fatalf("routes %v, want %v (each once)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("routes %v, want %v", got, want)
		}
	}
}
