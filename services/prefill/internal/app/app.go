// Package app wires the prefill service: a worker (libs/worker) registered with
// role prefill.
package app

import (
	"context"
	"io"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/worker"
)

// DefaultListen is where the prefill service listens unless -listen says
// otherwise.
const DefaultListen = "127.0.0.1:9100"

// Main runs the service until ctx ends and returns the exit code.
func Main(ctx context.Context, version string, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return service.Run(ctx, Spec(version), service.Env{Args: args, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}

// Spec describes the prefill service.
func Spec(version string) service.Spec {
	return worker.Spec(discovery.RolePrefill, version, DefaultListen)
}
