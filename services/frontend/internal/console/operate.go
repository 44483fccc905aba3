package console

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/discovery"
)

// Operator takes the console's actions on the mesh that go past the
// snapshot: clearing a worker's prefix cache, and reading what the
// routers' indexes hold for a worker.
type Operator interface {
	ClearPrefixCache(ctx context.Context, workerID string) (Cleared, error)
	WorkerIndex(ctx context.Context, workerID string, limit uint32) ([]RouterIndex, error)
}

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
