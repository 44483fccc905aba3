package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"connectrpc.com/connect"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/frontend/internal/fleet"
)

// Operator takes the console's actions on the mesh that go past the
// snapshot: clearing a worker's prefix cache, and reading what the
// routers' indexes hold for a worker.
type Operator interface {
	ClearPrefixCache(ctx context.Context, workerID string) (Cleared, error)
	WorkerIndex(ctx context.Context, workerID string, limit uint32) ([]RouterIndex, error)
	// SetRollout starts or changes a role's canary rollout, EndRollout
	// promotes or aborts it, on the leading planner.
	SetRollout(ctx context.Context, c RolloutChange) (fleet.Rollout, error)
	// Cordon stops (or resumes) new requests to a worker that stays up.
	Cordon(ctx context.Context, workerID string, cordoned bool) (Cordoned, error)
	EndRollout(ctx context.Context, e RolloutEnd) (fleet.Rollout, error)
}

// Cordoned says what a cordon did.
type Cordoned struct {
	ID       string `json:"id"`
	Cordoned bool   `json:"cordoned"`
	// Running are the requests the worker is still serving.
	Running uint32 `json:"running_requests"`
}

// RolloutChange starts a rollout or changes its weight.
type RolloutChange struct {
	Role    string  `json:"role"`
	Version string  `json:"version"`
	Weight  float64 `json:"weight"`
	Judge   bool    `json:"judge"`
}

// RolloutEnd promotes or aborts a rollout.
type RolloutEnd struct {
	Role    string `json:"role"`
	Promote bool   `json:"promote"`
	Reason  string `json:"reason,omitempty"`
}

// ErrRefused wraps a planner's refusal of a malformed rollout change
// (the console answers 400 with its message).
var ErrRefused = errors.New("console: refused")

// Cleared says what clearing a worker's prefix cache did.
type Cleared struct {
	ID          string `json:"id"`
	BlocksAfter uint32 `json:"kv_blocks_used_after"`
	BlocksFreed uint32 `json:"kv_blocks_freed"`
}

// RouterIndex is one router's index of one worker.
type RouterIndex struct {
	Router       string            `json:"router"`
	Found        bool              `json:"found"`
	NextSequence uint64            `json:"next_sequence,omitempty"`
	Blocks       uint32            `json:"blocks"`
	PerTier      map[string]uint32 `json:"blocks_per_tier,omitempty"`
	Hashes       []string          `json:"block_hashes,omitempty"` // hex
	Error        string            `json:"error,omitempty"`
}

// ErrNoWorker is returned for a worker id that discovery does not list.
var ErrNoWorker = errors.New("console: no such worker in discovery")

// MeshOperator is the Operator over discovery and the services' RPCs.
type MeshOperator struct {
	Registry discovery.Registry
	HTTP     connect.HTTPClient
	Options  []connect.ClientOption
}

var _ Operator = (*MeshOperator)(nil)

// workerRoles are the roles a worker id may have.
var workerRoles = []string{discovery.RoleDecode, discovery.RolePrefill}

// ClearPrefixCache implements Operator.
func (m *MeshOperator) ClearPrefixCache(ctx context.Context, id string) (Cleared, error) {
	in, err := m.find(ctx, id)
	if err != nil {
		return Cleared{}, err
	}
	resp, err := workerv1connect.NewWorkerServiceClient(m.HTTP, in.URL(), m.Options...).
		ClearPrefixCache(ctx, connect.NewRequest(&workerv1.ClearPrefixCacheRequest{}))
	if err != nil {
		return Cleared{}, fmt.Errorf("worker %s: %w", id, err)
	}
	before, after := resp.Msg.GetKvBlocksUsedBefore(), resp.Msg.GetKvBlocksUsedAfter()
	return Cleared{ID: id, BlocksAfter: after, BlocksFreed: before - min(before, after)}, nil
}

// Cordon implements Operator.
func (m *MeshOperator) Cordon(ctx context.Context, id string, on bool) (Cordoned, error) {
	in, err := m.find(ctx, id)
	if err != nil {
		return Cordoned{}, err
	}
	resp, err := workerv1connect.NewWorkerServiceClient(m.HTTP, in.URL(), m.Options...).
		SetCordon(ctx, connect.NewRequest(&workerv1.SetCordonRequest{Cordoned: on}))
	if err != nil {
		return Cordoned{}, fmt.Errorf("worker %s: %w", id, err)
	}
	return Cordoned{ID: id, Cordoned: resp.Msg.GetCordoned(), Running: resp.Msg.GetRunningRequests()}, nil
}

// WorkerIndex implements Operator: every router's view, so an operator
// sees whether they agree.
func (m *MeshOperator) WorkerIndex(ctx context.Context, id string, limit uint32) ([]RouterIndex, error) {
	routers, err := m.Registry.Instances(ctx, discovery.RoleRouter)
	if err != nil {
		return nil, err
	}
	if len(routers) == 0 {
		return nil, errors.New("no router in discovery")
	}
	out := make([]RouterIndex, 0, len(routers))
	for _, r := range routers {
		ri := RouterIndex{Router: r.ID}
		resp, err := routerv1connect.NewRouterServiceClient(m.HTTP, r.URL(), m.Options...).
			GetWorkerIndex(ctx, connect.NewRequest(&routerv1.GetWorkerIndexRequest{WorkerId: id, Limit: limit}))
		if err != nil {
			ri.Error = err.Error()
		} else {
			msg := resp.Msg
			ri.Found, ri.NextSequence, ri.Blocks, ri.PerTier = msg.GetFound(), msg.GetNextSequence(), msg.GetBlocks(), msg.GetBlocksPerTier()
			for _, h := range msg.GetBlockHashes() {
				ri.Hashes = append(ri.Hashes, strconv.FormatUint(h, 16))
			}
		}
		out = append(out, ri)
	}
	return out, nil
}

// SetRollout implements Operator.
func (m *MeshOperator) SetRollout(ctx context.Context, c RolloutChange) (fleet.Rollout, error) {
	var out *plannerv1.Rollout
	err := m.onLeader(ctx, func(p plannerv1connect.PlannerServiceClient) error {
		res, err := p.SetRollout(ctx, connect.NewRequest(&plannerv1.SetRolloutRequest{Role: c.Role, Version: c.Version, Weight: c.Weight, Judge: c.Judge}))
		if err == nil {
			out = res.Msg.GetRollout()
		}
		return err
	})
	if err != nil {
		return fleet.Rollout{}, err
	}
	return fleet.RolloutView(out), nil
}

// EndRollout implements Operator.
func (m *MeshOperator) EndRollout(ctx context.Context, e RolloutEnd) (fleet.Rollout, error) {
	var out *plannerv1.Rollout
	err := m.onLeader(ctx, func(p plannerv1connect.PlannerServiceClient) error {
		res, err := p.EndRollout(ctx, connect.NewRequest(&plannerv1.EndRolloutRequest{Role: e.Role, Promote: e.Promote, Reason: e.Reason}))
		if err == nil {
			out = res.Msg.GetRollout()
		}
		return err
	})
	if err != nil {
		return fleet.Rollout{}, err
	}
	return fleet.RolloutView(out), nil
}

// onLeader calls f on the planners until one is not a standby: the one
// publishing rollouts first (the leader, most likely), then the rest.
func (m *MeshOperator) onLeader(ctx context.Context, f func(plannerv1connect.PlannerServiceClient) error) error {
	ps, err := m.Registry.Instances(ctx, discovery.RolePlanner)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return errors.New("no planner in discovery: rollouts need one")
	}
	slices.SortStableFunc(ps, func(a, b discovery.Instance) int {
		_, ha := a.Meta[discovery.MetaRollouts]
		_, hb := b.Meta[discovery.MetaRollouts]
		return cmp.Compare(b2i(hb), b2i(ha))
	})
	var errs []error
	for _, p := range ps {
		err := f(plannerv1connect.NewPlannerServiceClient(m.HTTP, p.URL(), m.Options...))
		switch connect.CodeOf(err) {
		case connect.CodeFailedPrecondition: // a standby
			errs = append(errs, fmt.Errorf("planner %s: %w", p.ID, err))
			continue
		case connect.CodeInvalidArgument, connect.CodeNotFound:
			msg := err.Error()
			if ce := new(connect.Error); errors.As(err, &ce) {
				msg = ce.Message()
			}
			return fmt.Errorf("%w: %s", ErrRefused, msg)
		}
		if err != nil {
			return fmt.Errorf("planner %s: %w", p.ID, err)
		}
		return nil
	}
	return errors.Join(errs...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (m *MeshOperator) find(ctx context.Context, id string) (discovery.Instance, error) {
	for _, role := range workerRoles {
		ins, err := m.Registry.Instances(ctx, role)
		if err != nil {
			return discovery.Instance{}, err
		}
		for _, in := range ins {
			if in.ID == id {
				return in, nil
			}
		}
	}
	return discovery.Instance{}, fmt.Errorf("%w: %q", ErrNoWorker, id)
}
