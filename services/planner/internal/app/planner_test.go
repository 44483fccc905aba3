package app

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"connectrpc.com/connect"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/disctest"
	"switchyard.dev/libs/mesh/discovery/filedisc"
)

// The plan counts the healthy workers of each model and role in discovery.
func TestPlanFollowsDiscovery(t *testing.T) {
	t.Parallel()
	reg, err := filedisc.New(filedisc.Config{Dir: t.TempDir(), Lease: time.Minute, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, in := range []discovery.Instance{
		disctest.Instance("decode-1", discovery.RoleDecode),
		disctest.Instance("decode-2", discovery.RoleDecode),
		disctest.Instance("prefill-1", discovery.RolePrefill),
	} {
		if _, err := reg.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	p := newPlanner(reg)
	if err := p.watch(ctx, nil); err != nil {
		t.Fatal(err)
	}
	observed := func() map[string]uint32 {
		res, err := p.GetPlan(ctx, connect.NewRequest(&plannerv1.GetPlanRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]uint32{}
		for _, pool := range res.Msg.GetPools() {
			got[pool.GetRole()] += pool.GetObserved()
		}
		return got
	}
	want := map[string]uint32{discovery.RoleDecode: 2, discovery.RolePrefill: 1}
	deptest.Eventually(t, 5*time.Second, fmt.Sprintf("observed pools %v", want), func() bool {
		return maps.Equal(observed(), want)
	})
}
