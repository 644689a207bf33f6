package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/launcher"
)

func (a *app) doctorCommand() *cli.Command {
	return &cli.Command{
		Name:     "doctor",
		Category: categoryUtility,
		Usage:    "say whether this node can run 'meshlaunch run', and what to ask the admin for if not",
		Description: `Starts a short probe in the namespaces 'meshlaunch run' would create and
reports: unprivileged user namespaces, /dev/net/tun inside them, a PID
namespace with its own /proc, and a mount namespace. With --server (and the
secret) it also asks the sidecar for the job's configuration, through the
proxy the environment names, and says what stands in the way. Exit status 1
if any check fails; 'meshlaunch tunnel' needs none of the namespaces.`,
		Flags: []cli.Flag{
			withEnv(&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up after this long"}),
			withEnv(&cli.StringFlag{Name: "server", Usage: "also check the sidecar at this URL: reachability, proxy, TLS and the secret"}),
			tokenFileFlag(),
			requireTLSFlag(),
			jobKeyFlag(),
			withEnv(&cli.StringFlag{Name: "ca-file", Usage: "PEM bundle trusted for the sidecar and the proxy"}),
			withEnv(&cli.BoolFlag{Name: "insecure", Usage: "do not verify the sidecar's certificate"}),
		},
		Action: a.action(func(ctx context.Context, cmd *cli.Command) error {
			if err := noArgs(cmd); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			findings := launcher.Check(ctx)
			if cmd.String("server") != "" {
				rc, err := a.serverConfig(cmd)
				if err != nil {
					return err
				}
				findings = append(findings, launcher.CheckServer(ctx, rc))
			}
			failed := 0
			for _, f := range findings {
				mark := "ok  "
				if !f.OK {
					mark, failed = "FAIL", failed+1
				}
				fmt.Fprintf(a.stdout, "%s %s", mark, f.Name)
				if f.Detail != "" {
					fmt.Fprintf(a.stdout, ": %s", f.Detail)
				}
				fmt.Fprintln(a.stdout)
			}
			if failed > 0 {
				return fmt.Errorf("doctor: %d of %d checks failed (see above)", failed, len(findings))
			}
			return nil
		}),
	}
}
