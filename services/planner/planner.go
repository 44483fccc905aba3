// Package planner is the planner service (pool sizing against SLA targets) as a unit that a
// process can host: its version and its service.Spec. The planner binary
// (cmd/planner) runs it alone; the switchyard binary (cmd/switchyard at the
// repository root) runs it beside other services in one process. Its
// wiring lives in internal/app, out of reach of other modules.
package planner

import (
	"context"
	"io"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/planner/internal/app"
)

// Version is the service's version, stamped at build time by
// scripts/build.sh: -ldflags "-X switchyard.dev/services/planner.Version=$(cat VERSION)+commit".
var Version = "dev"

// Spec describes the service. getenv supplies the environment defaults of
// its flags (os.Getenv in a process; nil means an empty environment).
func Spec(_ func(string) string) service.Spec { return app.Spec(Version) }

// Profile runs `planner profile` with args (after the subcommand) and
// returns the process exit code.
func Profile(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return app.Profile(ctx, args, stdout, stderr)
}
