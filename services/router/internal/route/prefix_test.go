package route

import (
	"testing"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/router/internal/policy"
)

// pullers are decode instances that publish KV transfer agents and pull
// prefixes; exporters only publish agents (-disagg=off).
func pullers(model string, ids ...string) []discovery.Instance {
	ins := exporters(model, ids...)
	for i := range ins {
		ins[i].Meta[discovery.MetaPrefixPull] = "1"
	}
	return ins
}

func exporters(model string, ids ...string) []discovery.Instance {
	ins := instances(discovery.RoleDecode, model, ids...)
	for i := range ins {
		ins[i].Meta[discovery.MetaKVTransfer] = "agent-" + ins[i].ID
	}
	return ins
}

// TestPrefixSource: in kv mode, a request whose prefix holder is loaded
// goes to an idle worker that copies the prefix from it (prefix_source),
// where it would otherwise queue on the holder: when either side has no
// transfer agent, or prefix pull is off. No source is named when the
// chosen worker holds the prefix, or in a mode that ignores the cache.
func TestPrefixSource(t *testing.T) {
	t.Parallel()
	prompt := tokens(64, 1) // 16 blocks
	busy := func(t *testing.T, r *Router) {
		t.Helper()
		// Predicted load on the holder h: an unrelated prompt routed there.
		if _, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "load", Model: "m", TokenIds: tokens(400, 9), Hints: &commonv1.Hints{WorkerId: "h"}}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		workers []discovery.Instance
		mut     func(*Config)
		load    bool
		decode  string
		source  string
		blocks  uint32
	}{
		{"busy holder: pull to the idle worker", pullers("m", "h", "w"), nil, true, "w", "h", 15},
		{"idle holder serves it", pullers("m", "h", "w"), nil, false, "h", "", 0},
		// Without a pull, recomputing 15 blocks costs more than waiting.
		{"holder has no agent", append(instances(discovery.RoleDecode, "m", "h"), pullers("m", "w")...), nil, true, "h", "", 0},
		{"idle worker has no agent", append(pullers("m", "h"), instances(discovery.RoleDecode, "m", "w")...), nil, true, "h", "", 0},
		{"idle worker does not pull (-disagg=off)", append(pullers("m", "h"), exporters("m", "w")...), nil, true, "h", "", 0},
		{"holder only exports (-disagg=off)", append(exporters("m", "h"), pullers("m", "w")...), nil, true, "w", "h", 15},
		{"pull off", pullers("m", "h", "w"), func(c *Config) { c.Params.PrefixPullWeight = 0 }, true, "h", "", 0},
		{"round-robin", pullers("m", "h", "w"), func(c *Config) { c.Mode = policy.ModeRoundRobin }, false, "h", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRouter(t, tt.mut)
			r.SetWorkers(tt.workers, nil)
			cache(t, r.cfg.Index, "h", prompt[:60], kvtier.Device) // 15 blocks
			if tt.load {
				busy(t, r)
			}
			res, err := r.Decide(t.Context(), &routerv1.RouteRequest{Model: "m", TokenIds: prompt})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetDecode().GetInstanceId() != tt.decode || res.GetPrefixSource().GetInstanceId() != tt.source || res.GetPrefixSourceBlocks() != tt.blocks {
				t.Fatalf("decode %q, source %q with %d blocks; want %q, %q with %d; candidates %v", res.GetDecode().GetInstanceId(),
					res.GetPrefixSource().GetInstanceId(), res.GetPrefixSourceBlocks(), tt.decode, tt.source, tt.blocks, res.GetCandidates())
			}
			if tt.source != "" && res.GetPrefixSource().GetAddress() == "" {
				t.Fatal("prefix source without an address")
			}
		})
	}
}

// TestPrefixSourceLimits: a source holding the whole prompt is named for
// all its blocks but the last (which the worker computes for its logits),
// and a migrating request is never told to pull from a worker it excludes.
func TestPrefixSourceLimits(t *testing.T) {
	t.Parallel()
	prompt := tokens(64, 1) // 16 blocks, the last one holding the last token
	for _, tc := range []struct {
		name    string
		exclude []string
		source  string
		blocks  uint32
	}{
		{"whole prompt cached", nil, "h", 15},
		{"holder excluded", []string{"h"}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRouter(t, nil)
			r.SetWorkers(pullers("m", "h", "w"), nil)
			cache(t, r.cfg.Index, "h", prompt, kvtier.Device)
			if _, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "load", Model: "m", TokenIds: tokens(400, 9), Hints: &commonv1.Hints{WorkerId: "h"}}); err != nil {
				t.Fatal(err)
			}
			res, err := r.Decide(t.Context(), &routerv1.RouteRequest{Model: "m", TokenIds: prompt, ExcludeInstanceIds: tc.exclude})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetDecode().GetInstanceId() != "w" || res.GetPrefixSource().GetInstanceId() != tc.source || res.GetPrefixSourceBlocks() != tc.blocks {
				t.Fatalf("decode %q, source %q with %d blocks; want w, %q with %d", res.GetDecode().GetInstanceId(),
					res.GetPrefixSource().GetInstanceId(), res.GetPrefixSourceBlocks(), tc.source, tc.blocks)
			}
		})
	}
}
