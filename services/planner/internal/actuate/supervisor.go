package actuate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"
	"switchyard.dev/gen/switchyard/supervisor/v1/supervisorv1connect"
)

// Supervisor scales the local supervisor's pools (cmd/supervisor): the
// pool of a role has the role's name ("decode", "prefill"), whatever the
// model, as make run's stack serves one model.
type Supervisor struct {
	api supervisorv1connect.SupervisorServiceClient
}

// NewSupervisor returns the actuator of the supervisor at url (e.g.
// http://127.0.0.1:9600), called over client with opts.
func NewSupervisor(url string, client *http.Client, opts ...connect.ClientOption) *Supervisor {
	return &Supervisor{api: supervisorv1connect.NewSupervisorServiceClient(client, strings.TrimRight(url, "/"), opts...)}
}

func (s *Supervisor) live(ctx context.Context, p Pool) ([]*supervisorv1.Instance, error) {
	res, err := s.api.ListInstances(ctx, connect.NewRequest(&supervisorv1.ListInstancesRequest{Pool: p.Role}))
	if err != nil {
		return nil, fmt.Errorf("actuate: supervisor pool %s: %w", p.Role, err)
	}
	return slices.DeleteFunc(res.Msg.Instances, func(in *supervisorv1.Instance) bool {
		return in.State == supervisorv1.InstanceState_INSTANCE_STATE_DRAINING
	}), nil
}

// Replicas implements Actuator.
func (s *Supervisor) Replicas(ctx context.Context, p Pool) (int, error) {
	ins, err := s.live(ctx, p)
	return len(ins), err
}

// Scale implements Actuator: it adds the missing instances in one call,
// or drains the surplus, victims first, then the newest.
func (s *Supervisor) Scale(ctx context.Context, p Pool, n int, victims []string) error {
	ins, err := s.live(ctx, p)
	if err != nil {
		return err
	}
	switch cur := len(ins); {
	case n > cur:
		_, err := s.api.AddInstances(ctx, connect.NewRequest(&supervisorv1.AddInstancesRequest{Pool: p.Role, Count: uint32(n - cur)}))
		if err != nil {
			return fmt.Errorf("actuate: supervisor: add %d to %s: %w", n-cur, p.Role, err)
		}
	case n < cur:
		ids := map[string]bool{}
		for _, in := range ins {
			ids[in.Id] = true
		}
		var order []string
		for _, v := range victims {
			if ids[v] {
				order = append(order, v)
				delete(ids, v)
			}
		}
		for range cur - n {
			id := ""
			if len(order) > 0 {
				id, order = order[0], order[1:]
			}
			_, err := s.api.RemoveInstance(ctx, connect.NewRequest(&supervisorv1.RemoveInstanceRequest{Pool: p.Role, Id: id}))
			if err != nil {
				if connect.CodeOf(err) == connect.CodeUnavailable {
					err = errors.Join(ErrBlocked, err)
				}
				return fmt.Errorf("actuate: supervisor: drain %q of %s: %w", id, p.Role, err)
			}
		}
	}
	return nil
}

// Remove drains one instance of pool by id (a canary's, when its rollout
// is aborted).
func (s *Supervisor) Remove(ctx context.Context, pool, id string) error {
	if _, err := s.api.RemoveInstance(ctx, connect.NewRequest(&supervisorv1.RemoveInstanceRequest{Pool: pool, Id: id})); err != nil {
		return fmt.Errorf("actuate: supervisor: remove %s from %s: %w", id, pool, err)
	}
	return nil
}
