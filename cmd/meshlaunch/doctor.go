package main

import (
	"context"
	"errors"
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
namespace with its own /proc, and a mount namespace. Exit status 1 if any
check fails; 'meshlaunch tunnel' needs none of them.`,
		Flags: []cli.Flag{
			withEnv(&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up after this long"}),
		},
		Action: a.action(func(ctx context.Context, cmd *cli.Command) error {
			if err := noArgs(cmd); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			failed := 0
			for _, f := range launcher.Check(ctx) {
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
				return errors.New("doctor: this node cannot run 'meshlaunch run' as it is; 'meshlaunch tunnel' still works")
			}
			return nil
		}),
	}
}
