// Command switchyard runs any set of Switchyard services in one process:
// `switchyard all` is the whole mesh, `switchyard router -- decode` two of
// its services. Each service is the same unit its own binary runs; see
// internal/cli for the command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"switchyard.dev/cmd/switchyard/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
