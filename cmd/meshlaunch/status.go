package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/identity"
	"github.com/meshlaunch/meshlaunch/meshapi"
	"github.com/meshlaunch/meshlaunch/wsproxy"
)

func (a *app) statusCommand() *cli.Command {
	return &cli.Command{
		Name:     "status",
		Category: categoryUtility,
		Usage:    "show a sidecar's peers, flows and denials",
		Description: `Asks the sidecar at --server (the same URL the launcher uses, ws:// or wss://,
or its http:// form) for its status, authenticated with the shared secret.
Inside the shadow pod: meshlaunch status --server ws://127.0.0.1:8080`,
		Flags: []cli.Flag{
			withEnv(&cli.StringFlag{Name: "server", Value: "ws://127.0.0.1:8080", Usage: "the sidecar's URL (with its path prefix, if any)"}),
			tokenFileFlag(),
			withEnv(&cli.BoolFlag{Name: "json", Usage: "print the raw JSON"}),
			withEnv(&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up after this long"}),
		},
		Action: a.action(a.runStatus),
	}
}

func (a *app) runStatus(ctx context.Context, cmd *cli.Command) error {
	if err := noArgs(cmd); err != nil {
		return err
	}
	secret, err := readSecret(cmd)
	if err != nil {
		return err
	}
	raw := cmd.String("server")
	raw = strings.Replace(strings.Replace(raw, "http://", "ws://", 1), "https://", "wss://", 1)
	u, err := wsproxy.ParseServerURL(raw)
	if err != nil {
		return usageError{fmt.Errorf("--server: %w", err)}
	}
	su := wsproxy.JoinPath(u, meshapi.StatusPath)
	su.Scheme = strings.Replace(su.Scheme, "ws", "http", 1)
	id, _ := identity.Derive(secret)
	ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, su.String(), nil)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+id.Credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("status: read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status: %s answered %s (a 401 means the secret differs from the sidecar's)", su.Redacted(), resp.Status)
	}
	if cmd.Bool("json") {
		_, err := a.stdout.Write(body)
		return err
	}
	var st meshapi.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("status: decode reply: %w", err)
	}
	return printStatus(a.stdout, st)
}

func printStatus(w io.Writer, st meshapi.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%s\nready\t%v\ndraining\t%v\npod IP\t%s\nuptime\t%s\nsessions\t%d\nauth failures\t%d\n",
		st.Version, st.Ready, st.Draining, st.PodIP, time.Duration(st.Uptime), st.Sessions, st.AuthFailures)
	fmt.Fprintf(tw, "flows\ttcp %d, udp %d, dialing %d, ingress %d (total tcp %d, udp %d)\n",
		st.Flows.TCP, st.Flows.UDP, st.Flows.InFlight, st.Flows.Ingress, st.Flows.TCPTotal, st.Flows.UDPTotal)
	for reason, n := range st.Denied {
		fmt.Fprintf(tw, "denied\t%s: %d\n", reason, n)
	}
	for _, p := range st.Peers {
		hs := "never"
		if !p.LastHandshake.IsZero() {
			hs = time.Since(p.LastHandshake).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "peer\t%s  %s  connected=%v  handshake %s  rx %d  tx %d\n",
			p.PublicKey, p.Address, p.Connected, hs, p.RxBytes, p.TxBytes)
	}
	return tw.Flush()
}
