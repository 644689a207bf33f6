package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/manifest"
)

func (a *app) manifestCommand() *cli.Command {
	return &cli.Command{
		Name:     "manifest",
		Category: categoryUtility,
		Usage:    "print the Kubernetes objects of a shadow pod (Secret, Deployment, Service, Ingress)",
		Description: `Renders a shadow pod running 'meshlaunch sidecar' with no privileges, its
Secret (a fresh secret unless --token-file or MESHLAUNCH_TOKEN gives one), a
Service for the exposed ports and an nginx Ingress for the websocket:

  meshlaunch manifest --name pod-a --namespace jobs --host mesh.example.org \
      --expose 9000 --route 10.96.0.0/12 --cluster-issuer letsencrypt > pod-a.yaml
  kubectl apply -f pod-a.yaml

More in docs/kubernetes.md.`,
		Flags: []cli.Flag{
			withEnv(&cli.StringFlag{Name: "name", Usage: "name of the objects and the pod (a DNS-1035 label); required"}),
			withEnv(&cli.StringFlag{Name: "namespace", Value: manifest.DefaultNamespace, Usage: "namespace of the objects"}),
			withEnv(&cli.StringFlag{Name: "host", Usage: "DNS name the Ingress serves the websocket on; required"}),
			withEnv(&cli.StringSliceFlag{Name: "expose", Usage: "pod port forwarded to the job, PORT[/tcp|/udp] (repeat)"}),
			withEnv(&cli.StringSliceFlag{Name: "route", Usage: "CIDR the job sends through the mesh (repeat)"}),
			withEnv(&cli.StringFlag{Name: "image", Value: manifest.DefaultImage, Usage: "the meshlaunch image (push 'make image' to your registry)"}),
			withEnv(&cli.StringFlag{Name: "path-prefix", Usage: "Ingress path of the websocket (e.g. /pod-a)"}),
			withEnv(&cli.StringFlag{Name: "tls-secret", Usage: "Secret with the Ingress's TLS certificate (default NAME-tls with --cluster-issuer)"}),
			withEnv(&cli.StringFlag{Name: "cluster-issuer", Usage: "cert-manager ClusterIssuer for the Ingress's certificate"}),
			withEnv(&cli.BoolFlag{Name: "native-sidecar", Usage: "run meshlaunch as a native sidecar (Kubernetes 1.29+) next to a pause container"}),
			withEnv(&cli.StringFlag{Name: "secret-name", Usage: "Secret holding the shared secret (default NAME)"}),
			withEnv(&cli.IntFlag{Name: "mesh-port", Value: manifest.DefaultMeshPort, Usage: "port of the sidecar's websocket, probes and metrics"}),
			withEnv(&cli.StringFlag{Name: "pause-image", Value: manifest.DefaultPauseImage, Usage: "placeholder container image with --native-sidecar"}),
			tokenFileFlag(),
		},
		Action: a.action(a.runManifest),
	}
}

func (a *app) runManifest(_ context.Context, cmd *cli.Command) error {
	if err := noArgs(cmd); err != nil {
		return err
	}
	o := manifest.Options{
		Name: cmd.String("name"), Namespace: cmd.String("namespace"), Host: cmd.String("host"),
		Ports: cmd.StringSlice("expose"), Routes: cmd.StringSlice("route"), Image: cmd.String("image"),
		PathPrefix: cmd.String("path-prefix"), TLSSecretName: cmd.String("tls-secret"),
		ClusterIssuer: cmd.String("cluster-issuer"), NativeSidecar: cmd.Bool("native-sidecar"),
		SecretName: cmd.String("secret-name"), MeshPort: int(cmd.Int("mesh-port")), PauseImage: cmd.String("pause-image"),
	}
	if _, ok := os.LookupEnv(envToken); ok || cmd.String(flagTokenFile) != "" {
		secret, err := readSecret(cmd)
		if err != nil {
			return err
		}
		o.Token = secret
	}
	var buf bytes.Buffer
	if err := manifest.Render(&buf, o); err != nil {
		var fe *manifest.FieldError
		if errors.As(err, &fe) {
			return usageError{err}
		}
		return err
	}
	if _, err := a.stdout.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("manifest: write stdout: %w", err)
	}
	return nil
}
