package app

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"connectrpc.com/connect"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/libs/mesh/discovery"
)

// planner keeps the latest pools per role from discovery watches.
type planner struct {
	reg   discovery.Registry
	mu    sync.Mutex
	pools map[string][]discovery.Instance // by role
}

func newPlanner(reg discovery.Registry) *planner {
	return &planner{reg: reg, pools: map[string][]discovery.Instance{}}
}

func (p *planner) watch(ctx context.Context, log *slog.Logger) error {
	roles := []string{discovery.RolePrefill, discovery.RoleDecode}
	return discovery.WatchRoles(ctx, p.reg, log, roles, func(latest map[string][]discovery.Instance) {
		p.mu.Lock()
		p.pools = latest
		p.mu.Unlock()
	})
}

func (p *planner) GetPlan(context.Context, *connect.Request[plannerv1.GetPlanRequest]) (*connect.Response[plannerv1.GetPlanResponse], error) {
	type key struct{ model, role string }
	counts := map[key]uint32{}
	p.mu.Lock()
	for role, ins := range p.pools {
		for _, in := range ins {
			counts[key{in.Model, role}]++
		}
	}
	p.mu.Unlock()
	res := &plannerv1.GetPlanResponse{Reason: "observe-only: the planner does not scale pools yet"}
	for k, n := range counts {
		res.Pools = append(res.Pools, &plannerv1.PoolStatus{Model: k.model, Role: k.role, Observed: n, Desired: n})
	}
	slices.SortFunc(res.Pools, func(a, b *plannerv1.PoolStatus) int {
		return cmp.Or(strings.Compare(a.Model, b.Model), strings.Compare(a.Role, b.Role))
	})
	return connect.NewResponse(res), nil
}
