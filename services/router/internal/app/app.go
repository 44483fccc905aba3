// Package app wires the router service.
package app

import (
	"context"
	"io"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
)

// Main runs the service until ctx ends and returns the exit code.
func Main(ctx context.Context, version string, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return service.Run(ctx, Spec(version), service.Env{Args: args, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}

// Spec describes the router service.
func Spec(version string) service.Spec {
	return service.Spec{
		Role:          discovery.RoleRouter,
		Version:       version,
		DefaultListen: "127.0.0.1:9000",
	}
}
