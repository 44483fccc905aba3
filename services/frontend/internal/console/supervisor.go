package console

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"
	"switchyard.dev/gen/switchyard/supervisor/v1/supervisorv1connect"
)

// Supervisor drains instances through the local supervisor's
// RemoveInstance: the instance gets SIGTERM, leaves discovery, finishes
// its streams and is not restarted. The supervisor names instances by
// the same IDs they register in discovery under.
type Supervisor struct {
	api supervisorv1connect.SupervisorServiceClient
}

// NewSupervisor returns a Drainer over the supervisor at url.
func NewSupervisor(hc connect.HTTPClient, url string, opts ...connect.ClientOption) *Supervisor {
	return &Supervisor{api: supervisorv1connect.NewSupervisorServiceClient(hc, strings.TrimRight(url, "/"), opts...)}
}

// Drain implements Drainer.
func (s *Supervisor) Drain(ctx context.Context, id string) (Drained, error) {
	list, err := s.api.ListInstances(ctx, connect.NewRequest(&supervisorv1.ListInstancesRequest{}))
	if err != nil {
		return Drained{}, fmt.Errorf("supervisor: list instances: %w", err)
	}
	for _, in := range list.Msg.GetInstances() {
		if in.GetId() != id {
			continue
		}
		resp, err := s.api.RemoveInstance(ctx, connect.NewRequest(&supervisorv1.RemoveInstanceRequest{Pool: in.GetPool(), Id: id}))
		if err != nil {
			return Drained{}, fmt.Errorf("supervisor: drain %s: %w", id, err)
		}
		return Drained{ID: resp.Msg.GetInstance().GetId(), Pool: resp.Msg.GetInstance().GetPool()}, nil
	}
	return Drained{}, fmt.Errorf("%w: %s", ErrUnknownInstance, id)
}
