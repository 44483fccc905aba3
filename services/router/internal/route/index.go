package route

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
)

// Bounds on GetWorkerIndex's listed hashes (router.proto).
const (
	defaultIndexLimit = 100
	maxIndexLimit     = 10000
)

// GetWorkerIndex implements RouterService.GetWorkerIndex: the index's
// blocks of one worker, counted per tier, the first limit hashes listed.
func (r *Router) GetWorkerIndex(_ context.Context, req *connect.Request[routerv1.GetWorkerIndexRequest]) (*connect.Response[routerv1.GetWorkerIndexResponse], error) {
	id := req.Msg.GetWorkerId()
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("worker_id is empty"))
	}
	limit := int(req.Msg.GetLimit())
	switch {
	case limit == 0:
		limit = defaultIndexLimit
	case limit > maxIndexLimit:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("limit %d: at most %d", limit, maxIndexLimit))
	}
	st, ok := r.cfg.Index.DumpWorker(id)
	resp := &routerv1.GetWorkerIndexResponse{Found: ok}
	if !ok {
		return connect.NewResponse(resp), nil
	}
	resp.NextSequence, resp.Blocks = st.Next, uint32(min(len(st.Blocks), 1<<32-1))
	resp.BlocksPerTier = map[string]uint32{}
	for i, b := range st.Blocks {
		for t := range kvtier.Tier(kvtier.Count) {
			if b.Tiers.Has(t) {
				resp.BlocksPerTier[t.String()]++
			}
		}
		if i < limit {
			resp.BlockHashes = append(resp.BlockHashes, b.Hash)
		}
	}
	return connect.NewResponse(resp), nil
}
