// Package app wires the planner service: it watches the worker pools in
// discovery and reports, per model and role, how many instances are healthy.
//
// Today the planner observes only: desired equals observed, and GetPlan says
// so. SLA-driven scaling (TTFT/ITL targets through Nomad or the local
// supervisor) is planned; see docs/services.md.
package app

import (
	"context"

	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
)

// Spec describes the planner service.
func Spec(version string) service.Spec {
	return service.Spec{
		Role:          discovery.RolePlanner,
		Version:       version,
		DefaultListen: "127.0.0.1:9400",
		Setup: func(ctx context.Context, rt *service.Runtime) error {
			p := newPlanner(rt.Registry)
			if rt.Registry != nil {
				if err := p.watch(ctx, rt.Logger); err != nil {
					return err
				}
			}
			rt.Server.Mount(plannerv1connect.NewPlannerServiceHandler(p, rt.Server.HandlerOptions()...))
			return nil
		},
	}
}
