package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

func TestEnvName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"log-level":    "MESHLAUNCH_LOG_LEVEL",
		"token-file":   "MESHLAUNCH_TOKEN_FILE",
		"host-network": "MESHLAUNCH_HOST_NETWORK",
		"listen":       "MESHLAUNCH_LISTEN",
	} {
		if got := envName(name); got != want {
			t.Errorf("envName(%q) = %q, want %q", name, got, want)
		}
	}
}

// flagsWithoutEnv walks the command tree under root and lists every flag
// whose environment variables do not include MESHLAUNCH_<NAME>, as
// "path of the command --flag".
func flagsWithoutEnv(root *cli.Command) []string {
	var missing []string
	var walk func(path string, c *cli.Command)
	walk = func(path string, c *cli.Command) {
		for _, f := range c.Flags {
			name := f.Names()[0]
			df, ok := f.(cli.DocGenerationFlag)
			if !ok || !slices.Contains(df.GetEnvVars(), envName(name)) {
				missing = append(missing, path+" --"+name)
			}
		}
		for _, sub := range c.Commands {
			walk(path+" "+sub.Name, sub)
		}
	}
	walk(root.Name, root)
	return missing
}

func TestEveryFlagHasEnv(t *testing.T) {
	t.Parallel()
	root := (&app{}).command()
	n := 0
	_ = root.Walk(func(c *cli.Command) error { n += len(c.Flags); return nil })
	if n < 2 {
		t.Fatalf("walk found %d flags; the tree has at least --log-level and --log-format", n)
	}
	if missing := flagsWithoutEnv(root); len(missing) > 0 {
		t.Fatalf("flags without a MESHLAUNCH_* environment variable (declare them with withEnv): %s",
			strings.Join(missing, ", "))
	}

	// Positive control: the check reports a flag declared without withEnv,
	// also in a nested command.
	bad := &cli.Command{Name: "x", Commands: []*cli.Command{{
		Name: "y",
		Flags: []cli.Flag{
			withEnv(&cli.StringFlag{Name: "good"}),
			&cli.StringFlag{Name: "plain"},
			&cli.IntFlag{Name: "wrong-env", Sources: cli.EnvVars("WRONG_ENV")},
		},
	}}}
	got := flagsWithoutEnv(bad)
	if want := []string{"x y --plain", "x y --wrong-env"}; !slices.Equal(got, want) {
		t.Fatalf("flagsWithoutEnv(synthetic tree) = %q, want %q", got, want)
	}
}

func TestNewLogger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level, format string
		wantDebug     bool
		wantInfo      bool
		wantPrefix    string
	}{
		{"debug", "text", true, true, "time="},
		{"info", "json", false, true, `{"time":`},
		{"WARN", "TEXT", false, false, ""},
		{"error", "json", false, false, ""},
	} {
		t.Run(tc.level+"/"+tc.format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(tc.level, tc.format, &buf)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("dbg")
			log.Info("inf")
			out := buf.String()
			if strings.Contains(out, "dbg") != tc.wantDebug || strings.Contains(out, "inf") != tc.wantInfo {
				t.Fatalf("level %s logged %q", tc.level, out)
			}
			if !strings.HasPrefix(out, tc.wantPrefix) {
				t.Fatalf("format %s logged %q", tc.format, out)
			}
		})
	}

	for _, tc := range []struct{ level, format, want string }{
		{"trace", "text", `invalid value "trace" for --log-level (or $MESHLAUNCH_LOG_LEVEL): allowed values are debug, info, warn, error`},
		{"", "text", `invalid value "" for --log-level`},
		{"info", "logfmt", `invalid value "logfmt" for --log-format (or $MESHLAUNCH_LOG_FORMAT): allowed values are text, json`},
	} {
		_, err := newLogger(tc.level, tc.format, &bytes.Buffer{})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("newLogger(%q, %q) = %v, want %q", tc.level, tc.format, err, tc.want)
		}
	}
}
