package route

import (
	"fmt"
	"testing"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/router/internal/policy"
)

// TestBuildPoolsDerivedFields checks that each pool's ID lists and
// position maps match its worker lists, which Decide relies on (pick reads
// loads by ID list index and matches by position map).
func TestBuildPoolsDerivedFields(t *testing.T) {
	t.Parallel()
	decode := append(instances(discovery.RoleDecode, "a", "d1", "d2", "d3"), instances(discovery.RoleDecode, "b", "d4")...)
	prefill := append(instances(discovery.RolePrefill, "b", "p1", "p2"), instances(discovery.RolePrefill, "a", "p3")...)
	decode = append(decode, instances(discovery.RoleDecode, "a", "d5")...) // a model's workers need not be adjacent
	p := buildPools(decode, prefill, bs, map[string]bool{"old": true}, func(discovery.Instance) *policy.TierWeights { return nil })
	for _, model := range []string{"a", "b"} {
		mp := p.pool(model)
		if mp == nil {
			t.Fatalf("no pool for %q", model)
		}
		checkRole(t, model+" decode", mp.decode, mp.decodeIDs, mp.decodePos)
		checkRole(t, model+" prefill", mp.prefill, mp.prefillID, mp.prefillAt)
	}
	if got := fmt.Sprint(ids(p.pool("a").decode), ids(p.pool("b").prefill)); got != "[d1 d2 d3 d5] [p1 p2]" {
		t.Errorf("workers in discovery order: got %s", got)
	}
	for _, id := range []string{"old", "d1", "d4", "d5", "p1", "p3"} {
		if !p.known[id] {
			t.Errorf("%s not known", id)
		}
	}
}

func checkRole(t *testing.T, name string, ws []Worker, list []string, pos map[string]int) {
	t.Helper()
	if len(list) != len(ws) || len(pos) != len(ws) {
		t.Fatalf("%s: %d workers, %d ids, %d positions", name, len(ws), len(list), len(pos))
	}
	for i, w := range ws {
		if list[i] != w.ID || pos[w.ID] != i {
			t.Errorf("%s: worker %d is %s, ids[%d] = %s, pos[%s] = %d", name, i, w.ID, i, list[i], w.ID, pos[w.ID])
		}
	}
}

func ids(ws []Worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

// TestCordonedWorkersTakeNoRequests: a cordoned worker is left out of its
// pool, even when it holds the prompt's prefix; uncordoned, it wins again.
func TestCordonedWorkersTakeNoRequests(t *testing.T) {
	t.Parallel()
	r := newRouter(t, nil)
	ins := instances(discovery.RoleDecode, "m", "w1", "w2")
	prompt := tokens(32, 7)
	cache(t, r.cfg.Index, "w2", prompt, kvtier.Device)
	ins[1].Meta[discovery.MetaCordoned] = "1"
	r.SetWorkers(ins, nil)
	for range 20 {
		res, err := r.Decide(t.Context(), &routerv1.RouteRequest{Model: "m", TokenIds: prompt})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.GetDecode().GetInstanceId(); got != "w1" {
			t.Fatalf("routed to %s while it is cordoned", got)
		}
	}
	delete(ins[1].Meta, discovery.MetaCordoned)
	r.SetWorkers(ins, nil)
	if res, err := r.Decide(t.Context(), &routerv1.RouteRequest{Model: "m", TokenIds: prompt}); err != nil || res.GetDecode().GetInstanceId() != "w2" {
		t.Errorf("uncordoned holder of the prefix: routed to %v, %v", res.GetDecode().GetInstanceId(), err)
	}
}
