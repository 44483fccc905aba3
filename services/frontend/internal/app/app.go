// Package app wires the frontend service: flags, upstream clients, the
// model catalog, the generator and the OpenAI-compatible API, all mounted
// on the shared service runtime (libs/mesh), which also serves /health,
// /live, /ready and /metrics.
package app

import (
	"context"
	"errors"
	"flag"
	"io"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
)

// Main runs the service until ctx ends and returns the exit code.
func Main(ctx context.Context, version string, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return service.Run(ctx, Spec(version, getenv), service.Env{Args: args, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}

// Spec describes the frontend service. getenv supplies
// SWITCHYARD_API_KEYS; nil means an empty environment.
func Spec(version string, getenv func(string) string) service.Spec {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	f, pub := &flags{getenv: getenv}, &publicTLS{}
	return service.Spec{
		Role:          discovery.RoleFrontend,
		Version:       version,
		DefaultListen: "127.0.0.1:8000",
		Flags: func(fs *flag.FlagSet) {
			f.register(fs)
			pub.register(fs)
		},
		Validate: func() error { return errors.Join(f.validate(), pub.validate()) },
		Setup: func(ctx context.Context, rt *service.Runtime) error {
			if err := pub.apply(rt); err != nil {
				return err
			}
			return setup(ctx, rt, f, version)
		},
	}
}
