package route

import (
	"math"
	"testing"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/router/internal/policy"
)

// versioned is n decode workers of version v, ids prefix0..
func versioned(prefix, v string, n int) []discovery.Instance {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = prefix + string(rune('a'+i))
	}
	ins := instances(discovery.RoleDecode, "m", ids...)
	for i := range ins {
		ins[i].Version = v
	}
	return ins
}

func splitRouter(t *testing.T, mode string, weight float64) (*Router, *canary.Split) {
	t.Helper()
	split, err := canary.NewSplit(0)
	if err != nil {
		t.Fatal(err)
	}
	split.Set(canary.Rollouts{discovery.RoleDecode: {Version: "2", Weight: weight}})
	return newRouter(t, func(c *Config) { c.Split, c.Mode = split, mode }), split
}

// TestCanaryShareHolds: over 1,000 requests with distinct prompts the
// canary version serves its weight within 2 points, in every mode and
// whatever the replica counts; every response says the worker's version
// and group.
func TestCanaryShareHolds(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{policy.ModeKV, policy.ModeRoundRobin, policy.ModeLeastLoaded} {
		for _, counts := range [][2]int{{1, 8}, {3, 3}, {8, 1}} {
			r, _ := splitRouter(t, mode, 0.1)
			r.SetWorkers(append(versioned("old-", "1", counts[1]), versioned("new-", "2", counts[0])...), nil)
			canaries := 0
			for i := range 1000 {
				res, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "q", Model: "m", TokenIds: tokens(16, i)})
				if err != nil {
					t.Fatal(err)
				}
				d := res.GetDecode()
				if d.GetCanary() != (d.GetVersion() == "2") {
					t.Fatalf("worker %s version %q canary %v", d.GetInstanceId(), d.GetVersion(), d.GetCanary())
				}
				if d.GetCanary() {
					canaries++
				}
			}
			if got := float64(canaries) / 1000; math.Abs(got-0.1) > 0.02 {
				t.Errorf("%s with %d canaries, %d baseline: canary share %.3f, want 0.10±0.02", mode, counts[0], counts[1], got)
			}
		}
	}
}

// TestCanarySplitKeepsCostRanking: within its group a request still goes
// to the worker holding its prefix, and the same prompt always lands in
// the same group (sticky), so a canary builds its own cache.
func TestCanarySplitKeepsCostRanking(t *testing.T) {
	t.Parallel()
	r, _ := splitRouter(t, policy.ModeKV, 0.5)
	r.SetWorkers(append(versioned("old-", "1", 3), versioned("new-", "2", 3)...), nil)
	for seed := range 40 {
		prompt := tokens(32, seed)
		first, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "a", Model: "m", TokenIds: prompt})
		if err != nil {
			t.Fatal(err)
		}
		w := first.GetDecode().GetInstanceId()
		cache(t, r.cfg.Index, w, prompt, kvtier.Device)
		again, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "b", Model: "m", TokenIds: prompt})
		if err != nil {
			t.Fatal(err)
		}
		if got := again.GetDecode().GetInstanceId(); got != w {
			t.Errorf("prompt %d: first to %s, then to %s (holding its prefix)", seed, w, got)
		}
	}
}

// TestCanarySplitEdges: a request naming its worker, a migration away
// from the only canary, and an affinity key from the frontend.
func TestCanarySplitEdges(t *testing.T) {
	t.Parallel()
	r, split := splitRouter(t, policy.ModeKV, 1)
	r.SetWorkers(append(versioned("old-", "1", 2), versioned("new-", "2", 1)...), nil)
	decide := func(req *routerv1.RouteRequest) string {
		t.Helper()
		req.Model = "m"
		res, err := r.Decide(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.GetDecode().GetInstanceId()
	}
	if got := decide(&routerv1.RouteRequest{TokenIds: tokens(8, 1)}); got != "new-a" {
		t.Errorf("weight 1: routed to %s, want the canary", got)
	}
	if got := decide(&routerv1.RouteRequest{TokenIds: tokens(8, 1), Hints: &commonv1.Hints{WorkerId: "old-b"}}); got != "old-b" {
		t.Errorf("direct to old-b: routed to %s", got)
	}
	if got := decide(&routerv1.RouteRequest{TokenIds: tokens(8, 1), ExcludeInstanceIds: []string{"new-a"}}); got == "new-a" {
		t.Errorf("migrating away from the only canary went back to it")
	}
	split.Set(canary.Rollouts{discovery.RoleDecode: {Version: "2", Weight: 0.5}})
	// One affinity key, many prompts: one group.
	var key uint64 = 12345
	want := decide(&routerv1.RouteRequest{TokenIds: tokens(8, 0), AffinityKey: key}) == "new-a"
	for i := range 50 {
		if got := decide(&routerv1.RouteRequest{TokenIds: tokens(8, i), AffinityKey: key}) == "new-a"; got != want {
			t.Fatalf("prompt %d with one affinity key changed group", i)
		}
	}
	// Tagged canaries without a rollout take the tag weight.
	split.Set(nil)
	ins := versioned("old-", "1", 3)
	ins[2].Tags = []string{discovery.TagCanary}
	r.SetWorkers(ins, nil)
	for i := range 100 {
		if got := decide(&routerv1.RouteRequest{TokenIds: tokens(8, i)}); got == "old-c" {
			t.Fatalf("tag weight 0: the tagged canary got prompt %d", i)
		}
	}
}
