// Package frontend is the frontend service (the OpenAI-compatible HTTP API) as a unit that a
// process can host: its version and its service.Spec. The frontend binary
// (cmd/frontend) runs it alone; the switchyard binary (cmd/switchyard at the
// repository root) runs it beside other services in one process. Its
// wiring lives in internal/app, out of reach of other modules.
package frontend

import (
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/frontend/internal/app"
)

// Version is the service's version, stamped at build time by
// scripts/build.sh: -ldflags "-X switchyard.dev/services/frontend.Version=$(cat VERSION)+commit".
var Version = "dev"

// Spec describes the service. getenv supplies the environment defaults of
// its flags (os.Getenv in a process; nil means an empty environment).
func Spec(getenv func(string) string) service.Spec { return app.Spec(Version, getenv) }
