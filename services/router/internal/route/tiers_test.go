package route

import (
	"maps"
	"slices"
	"testing"
	"time"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/router/internal/policy"
)

// The shared tier is one holder in the index, and every worker of its
// model that loads from it is credited with what it holds: a worker holding a longer prefix
// of its own keeps it, the others count the shared prefix; the shared
// holder of another model or block size counts for nobody.
func TestSharedHolder(t *testing.T) {
	t.Parallel()
	r := newRouter(t, nil)
	workers := instances(discovery.RoleDecode, "m", "w1", "w2", "w3", "w4")
	for _, w := range workers[:3] {
		w.Meta[discovery.MetaKVSharedBlocks] = "1000"
	}
	r.SetWorkers(workers, nil) // w4 has no shared tier
	ix := r.cfg.Index
	prompt := tokens(40, 3) // 10 blocks
	cache(t, ix, SharedHolder("m", bs), prompt[:6*bs], kvtier.External)
	cache(t, ix, SharedHolder("other", bs), prompt, kvtier.External)
	cache(t, ix, SharedHolder("m", 2*bs), prompt, kvtier.External)
	cache(t, ix, "w2", prompt[:8*bs], kvtier.Host)
	res, err := r.Decide(t.Context(), &routerv1.RouteRequest{Model: "m", TokenIds: prompt})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	for _, c := range res.GetCandidates() {
		got[c.GetInstanceId()] = c.GetOverlapBlocks()
	}
	if want := map[string]uint32{"w1": 6, "w2": 8, "w3": 6, "w4": 0}; !maps.Equal(got, want) {
		t.Fatalf("overlaps %v; want %v", got, want)
	}
	if res.GetDecode().GetInstanceId() != "w2" {
		t.Fatalf("routed to %s; want w2, which holds the longest prefix", res.GetDecode().GetInstanceId())
	}
}

// Each worker's tier credit comes from the load times it measured: a
// disk that loads a block in a tenth of its prefill beats a host tier
// that loads slower than a prefill; with fixed weights the host wins.
func TestDerivedCredit(t *testing.T) {
	t.Parallel()
	prompt := tokens(40, 4) // 10 blocks
	workers := instances(discovery.RoleDecode, "m", "w1", "w2")
	workers[0].Meta[discovery.MetaKVLoadNanos] = "disk=10000"
	workers[0].Meta[discovery.MetaKVPrefillBlockNanos] = "100000"
	workers[1].Meta[discovery.MetaKVLoadNanos] = "host=200000"
	workers[1].Meta[discovery.MetaKVPrefillBlockNanos] = "100000"
	for _, tt := range []struct {
		fixed bool
		want  string
	}{{false, "w1"}, {true, "w2"}} {
		r := newRouter(t, func(c *Config) { c.FixedTierWeights = tt.fixed })
		r.SetWorkers(workers, nil)
		cache(t, r.cfg.Index, "w1", prompt, kvtier.Disk)
		cache(t, r.cfg.Index, "w2", prompt, kvtier.Host)
		res, err := r.Decide(t.Context(), &routerv1.RouteRequest{Model: "m", TokenIds: prompt})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.GetDecode().GetInstanceId(); got != tt.want {
			t.Errorf("fixed %t: routed to %s, want %s; candidates %v", tt.fixed, got, tt.want, res.GetCandidates())
		}
	}
	w := DerivedCredit(workers[0], time.Millisecond, policy.DefaultTierWeights())
	if w == nil || w[kvtier.Disk] != 0.9 || w[kvtier.Host] != policy.DefaultTierWeights()[kvtier.Host] {
		t.Fatalf("derived %v", w)
	}
	bad := instances(discovery.RoleDecode, "m", "w3")[0]
	bad.Meta[discovery.MetaKVLoadNanos] = "host=fast"
	if DerivedCredit(bad, time.Millisecond, policy.DefaultTierWeights()) != nil {
		t.Fatal("malformed load times derived credits")
	}
}

// The shared tier is followed at the block size each model's pool routes
// with: its workers' block_size, else the router's default.
func TestSharedNamespaces(t *testing.T) {
	t.Parallel()
	r := newRouter(t, func(c *Config) { c.DefaultBlockSize = 2 * bs })
	noSize := instances(discovery.RoleDecode, "b", "w2")
	delete(noSize[0].Meta, discovery.MetaBlockSize)
	r.SetWorkers(append(instances(discovery.RoleDecode, "a", "w1"), noSize...), nil)
	want := []SharedNamespace{{"a", bs}, {"b", r.cfg.DefaultBlockSize}}
	if got := r.SharedNamespaces(); !slices.Equal(got, want) {
		t.Fatalf("namespaces %v; want %v", got, want)
	}
}
