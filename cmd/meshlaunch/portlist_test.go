package main

import (
	"context"
	"slices"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/meshlaunch/meshlaunch/policy"
)

func TestMergePortLists(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"10.0.0.0/8:80", "443", "8000-8999"}, []string{"10.0.0.0/8:80,443,8000-8999"}},
		{[]string{"10.96.0.0/12", "10.244.0.0/16:8080", "8443"}, []string{"10.96.0.0/12", "10.244.0.0/16:8080,8443"}},
		{[]string{"[fd00::/8]:53", "853", "::1"}, []string{"[fd00::/8]:53,853", "::1"}},
		{[]string{"443"}, []string{"443"}}, // left for the parser to refuse
	} {
		if got := mergePortLists(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("mergePortLists(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAllowWithPortListFromFlags runs the flag parsing for real: the
// sidecar's --allow with a comma-separated port list must reach the policy
// as one rule (the flag library splits slice values at commas).
func TestAllowWithPortListFromFlags(t *testing.T) {
	var got []string
	cmd := (&app{}).sidecarCommand()
	cmd.Action = func(_ context.Context, c *cli.Command) error {
		got = mergePortLists(c.StringSlice("allow"))
		return nil
	}
	if err := cmd.Run(context.Background(), []string{"sidecar", "--allow", "10.0.0.0/8:80,443,8000-8999", "--allow", "10.96.0.0/12"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8:80,443,8000-8999", "10.96.0.0/12"}
	if !slices.Equal(got, want) {
		t.Fatalf("--allow = %q, want %q", got, want)
	}
	for _, r := range got {
		if _, err := policy.ParseRule(r); err != nil {
			t.Fatal(err)
		}
	}
}
