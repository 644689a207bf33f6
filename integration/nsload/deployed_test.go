package nsload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/meshlaunch/meshlaunch/manifest"
)

// deployment is how "meshlaunch manifest" runs the sidecar container:
// the tests run the sidecar with the same GOMEMLIMIT and hold it to the
// same memory limit, which the kernel would enforce in a pod.
type deployment struct {
	goMemLimit  string // the GOMEMLIMIT environment variable
	memLimitMiB float64
}

var deployed struct {
	once sync.Once
	d    deployment
	err  error
}

// deployedSidecar renders a shadow pod's manifest and reads its sidecar
// container's GOMEMLIMIT and memory limit.
func deployedSidecar(t *testing.T) deployment {
	t.Helper()
	deployed.once.Do(func() { deployed.d, deployed.err = readDeployment() })
	if deployed.err != nil {
		t.Fatalf("the sidecar's deployment from manifest.Render: %v", deployed.err)
	}
	return deployed.d
}

func readDeployment() (deployment, error) {
	var buf bytes.Buffer
	if err := manifest.Render(&buf, manifest.Options{Name: "nsload", Host: "mesh.test"}); err != nil {
		return deployment{}, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(&buf))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return deployment{}, errors.New("no Deployment")
		}
		if err != nil {
			return deployment{}, err
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		return sidecarContainer(d.Spec.Template.Spec)
	}
}

// sidecarContainer finds the container (or native sidecar) that sets
// GOMEMLIMIT and returns its settings.
func sidecarContainer(spec corev1.PodSpec) (deployment, error) {
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
		if i < 0 {
			continue
		}
		lim, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return deployment{}, fmt.Errorf("container %s has no memory limit", c.Name)
		}
		return deployment{goMemLimit: c.Env[i].Value, memLimitMiB: float64(lim.Value()) / (1 << 20)}, nil
	}
	return deployment{}, errors.New("no container sets GOMEMLIMIT")
}
