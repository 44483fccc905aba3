// Command loadtest benchmarks an OpenAI-compatible streaming LLM endpoint
// with synthetic or trace-replay workloads. See loadtest/README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"switchyard.dev/loadtest/internal/cli"
)

func main() { os.Exit(run()) }

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore default handling so a second Ctrl-C
	// kills a run stuck writing its results.
	go func() {
		<-ctx.Done()
		stop()
	}()
	return cli.Run(ctx, os.Args, os.Stdout, os.Stderr)
}
