// Command planner is the Switchyard planner service; see
// services/planner/README.md. `planner profile` measures a worker and
// writes the profile the service plans with.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/planner"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "profile" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := planner.Profile(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(service.Main(planner.Spec(os.Getenv)))
}
