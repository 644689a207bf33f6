package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/urfave/cli/v3"
)

// Names of the root command's flags.
const (
	flagLogLevel  = "log-level"
	flagLogFormat = "log-format"
)

// envPrefix starts the environment variable of every flag.
const envPrefix = "MESHLAUNCH_"

// envName returns the environment variable that sets the flag called name:
// "log-level" is MESHLAUNCH_LOG_LEVEL.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// withEnv makes f settable from its MESHLAUNCH_* environment variable and
// from extra variables, in that order of precedence; a value on the command
// line wins over all of them. Every flag of every command is declared through
// it (TestEveryFlagHasEnv enforces this):
//
//	withEnv(&cli.StringFlag{Name: "listen", Usage: "..."})
func withEnv[T any, C any, VC cli.ValueCreator[T, C]](f *cli.FlagBase[T, C, VC], extra ...string) *cli.FlagBase[T, C, VC] {
	f.Sources = cli.EnvVars(append([]string{envName(f.Name)}, extra...)...)
	return f
}

// errChoice reports that flag has value, which is not one of allowed.
func errChoice(flag, value string, allowed []string) error {
	return fmt.Errorf("invalid value %q for --%s (or $%s): allowed values are %s",
		value, flag, envName(flag), strings.Join(allowed, ", "))
}

var (
	logLevelNames  = []string{"debug", "info", "warn", "error"}
	logLevels      = []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}
	logFormatNames = []string{"text", "json"}
)

// newLogger returns a logger writing to w that drops records below level
// ("debug", "info", "warn" or "error") and formats them as format ("text" or
// "json"). Both are matched without regard to case. The error names the
// offending flag and the allowed values.
func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var opts slog.HandlerOptions
	found := false
	for i, name := range logLevelNames {
		if strings.EqualFold(level, name) {
			opts.Level, found = logLevels[i], true
		}
	}
	if !found {
		return nil, errChoice(flagLogLevel, level, logLevelNames)
	}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, &opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &opts)), nil
	}
	return nil, errChoice(flagLogFormat, format, logFormatNames)
}

// discardLogger is the logger before flags are parsed.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
