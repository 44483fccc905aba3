// Package cli is the loadtest command: it parses flags, wires a workload,
// the measuring client and the runner, shows progress and writes the output
// folder. Run is the whole program behind main, so tests start it in-process
// against a fake server.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"switchyard.dev/loadtest/internal/report"
)

// Exit statuses.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// Run executes argv (argv[0] is the program name) and returns the exit
// status. ctx ending (SIGINT, SIGTERM) stops the run; results measured so
// far are still written.
func Run(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	args := argv[1:]
	if len(args) > 0 && args[0] == "compare" {
		return compare(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	cfg, err := parseConfig(args, stderr, time.Now())
	switch {
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case err != nil:
		fmt.Fprintf(stderr, "loadtest: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return ExitUsage
	}
	level := slog.LevelInfo
	if cfg.Quiet {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return bench(ctx, cfg, argv, stdout, stderr, log)
}

func compare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "markdown", "markdown or text (aligned columns)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: loadtest compare [--format markdown|text] RUN_DIR RUN_DIR...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() < 2 {
		fmt.Fprintln(stderr, "loadtest compare: need at least two run folders")
		return ExitUsage
	}
	if *format != "markdown" && *format != "text" {
		fmt.Fprintf(stderr, "loadtest compare: --format %q: want markdown or text\n", *format)
		return ExitUsage
	}
	runs, err := report.LoadRuns(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "loadtest compare: %v\n", err)
		return ExitFailure
	}
	table := report.Compare(runs)
	write := table.WriteMarkdown
	if *format == "text" {
		write = table.WriteText
	}
	if err := write(stdout); err != nil {
		fmt.Fprintf(stderr, "loadtest compare: %v\n", err)
		return ExitFailure
	}
	return ExitOK
}
