// Package app wires the KV block manager controller. Today it is the fleet's
// inventory of KV storage: every worker publishes its KV capacity (blocks,
// block size) in discovery, and ListPools reports it per worker and tier.
// Moving blocks between tiers (host memory, disk, object store) is planned;
// see docs/services.md.
package app

import (
	"context"

	"switchyard.dev/gen/switchyard/kvbm/v1/kvbmv1connect"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
)

// Spec describes the kvbm-controller service.
func Spec(version string) service.Spec {
	return service.Spec{
		Role:          discovery.RoleKVBMController,
		Version:       version,
		DefaultListen: "127.0.0.1:9300",
		Setup: func(ctx context.Context, rt *service.Runtime) error {
			rt.Server.Mount(kvbmv1connect.NewKvbmControllerServiceHandler(&controller{reg: rt.Registry}, rt.Server.HandlerOptions()...))
			return nil
		},
	}
}
