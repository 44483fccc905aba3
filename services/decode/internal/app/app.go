// Package app wires the decode service: a worker (libs/worker) registered with
// role decode. With no prefill pool (the only mode today) a decode worker
// prefills its own prompts: aggregated serving.
package app

import (
	"context"
	"io"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/worker"
)

// DefaultListen is where the decode service listens unless -listen says
// otherwise.
const DefaultListen = "127.0.0.1:9200"

// Main runs the service until ctx ends and returns the exit code.
func Main(ctx context.Context, version string, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return service.Run(ctx, Spec(version), service.Env{Args: args, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}

// Spec describes the decode service.
func Spec(version string) service.Spec {
	return worker.Spec(discovery.RoleDecode, version, DefaultListen)
}
