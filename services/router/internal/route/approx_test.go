package route

import (
	"testing"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/radix"
)

// Without KV events the router remembers what it routed where.
func TestApproximate(t *testing.T) {
	t.Parallel()
	r := newRouter(t, func(c *Config) { c.Approx = "auto" })
	r.SetWorkers(instances(discovery.RoleDecode, "m", "a", "b", "c"), nil)
	for _, id := range []string{"a", "b", "c"} {
		_ = r.cfg.Index.AddWorker(id)
		r.SetApprox(id)
	}
	prompt := tokens(64, 7)
	first, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "x", Model: "m", TokenIds: prompt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Release(t.Context(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: "x"})); err != nil {
		t.Fatal(err)
	}
	again, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "y", Model: "m", TokenIds: prompt})
	if err != nil {
		t.Fatal(err)
	}
	if first.GetDecode().GetInstanceId() != again.GetDecode().GetInstanceId() {
		t.Fatalf("same prompt went to %s then %s", first.GetDecode().GetInstanceId(), again.GetDecode().GetInstanceId())
	}
}

// Marking a worker approximate drops what the index held for it (a
// snapshot's approximation no tracker here could expire); clearing it
// stops approximating: routed prefixes are no longer inserted.
func TestApproxLifecycle(t *testing.T) {
	t.Parallel()
	ix := radix.New()
	r := newRouter(t, func(c *Config) { c.Approx = "auto"; c.Index = ix })
	r.SetWorkers(instances(discovery.RoleDecode, "m", "a"), nil)
	prompt := tokens(64, 7)
	cache(t, ix, "a", prompt, kvtier.Device) // as restored from a snapshot
	r.SetApprox("a")
	if st := ix.Dump()["a"]; len(st.Blocks) != 0 {
		t.Fatalf("%d restored blocks kept after SetApprox", len(st.Blocks))
	}
	if _, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "x", Model: "m", TokenIds: prompt}); err != nil {
		t.Fatal(err)
	}
	routed := len(ix.Dump()["a"].Blocks)
	if routed == 0 {
		t.Fatal("the routed prefix was not approximated")
	}
	r.ClearApprox("a")
	if _, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "y", Model: "m", TokenIds: tokens(64, 9)}); err != nil {
		t.Fatal(err)
	}
	if n := len(ix.Dump()["a"].Blocks); n != routed {
		t.Fatalf("%d blocks after ClearApprox and another decision, want %d (no more inserts)", n, routed)
	}
}
