package routesim

import (
	"maps"
	"slices"
	"testing"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/kvtier"
)

// A pool too small for the conversations' prefixes loses them; a host
// tier keeps them, so later turns load them instead of recomputing:
// more hits, less prefill time, and every loaded block counted.
func TestHostTierKeepsEvictedPrefixes(t *testing.T) {
	t.Parallel()
	reqs := conversations(12, 4, 200*time.Millisecond)
	small := Config{Workers: 2, Engine: engine.Config{NumBlocks: 700}}
	tiered := small
	tiered.Tiers = []TierConfig{{Tier: kvtier.Host, Blocks: 4096, BlockTime: ProfileH100[kvtier.Host]}}
	without, with := run(t, small, reqs), run(t, tiered, reqs)
	if with.HitRatio() <= without.HitRatio() || with.Onboarded[kvtier.Host] == 0 {
		t.Fatalf("hit ratio %.3f with a host tier (%d blocks loaded), %.3f without: want more hits", with.HitRatio(), with.Onboarded[kvtier.Host], without.HitRatio())
	}
	if with.MeanTTFT() >= without.MeanTTFT() {
		t.Errorf("mean TTFT %v with a host tier, %v without: want lower", with.MeanTTFT(), without.MeanTTFT())
	}
	var per int
	for _, o := range with.Requests {
		per += o.Onboarded[kvtier.Host]
	}
	if per != with.Onboarded[kvtier.Host] {
		t.Errorf("requests loaded %d blocks, the total says %d", per, with.Onboarded[kvtier.Host])
	}
}

// A tier slower to load from than recomputing is never loaded from.
func TestSlowTierNotLoaded(t *testing.T) {
	t.Parallel()
	reqs := conversations(12, 4, 200*time.Millisecond)
	cfg := Config{Workers: 2, Engine: engine.Config{NumBlocks: 700},
		Tiers: []TierConfig{{Tier: kvtier.Disk, Blocks: 4096, BlockTime: time.Second}}}
	if res := run(t, cfg, reqs); res.Onboarded[kvtier.Disk] != 0 {
		t.Fatalf("%d blocks loaded from a tier that takes a second a block", res.Onboarded[kvtier.Disk])
	}
}

// After a replay the router's index holds, for every worker, exactly its
// pool's cached blocks and each tier's blocks, tier for tier.
func TestTierIndexExact(t *testing.T) {
	t.Parallel()
	cfg := Config{Workers: 3, Engine: engine.Config{NumBlocks: 500},
		Tiers: []TierConfig{{Tier: kvtier.Host, Blocks: 300, BlockTime: ProfileH100[kvtier.Host]}, {Tier: kvtier.Disk, Blocks: 1200, BlockTime: ProfileH100[kvtier.Disk]}}}
	if err := cfg.withDefaults(); err != nil {
		t.Fatal(err)
	}
	s, err := newReplay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reqs := conversations(10, 5, 150*time.Millisecond)
	if _, err := s.runAll(t.Context(), slices.Values(reqs)); err != nil {
		t.Fatal(err)
	}
	dump := s.index.Dump()
	for _, w := range s.workers {
		want := map[uint64]kvtier.Mask{}
		for _, ev := range w.kv.Snapshot() {
			for _, h := range ev.BlockHashes {
				want[h] |= kvtier.Device.Mask()
			}
		}
		for _, tier := range w.tiers {
			if len(tier.where) == 0 {
				t.Fatalf("%s's %s tier is empty: the test needs it used", w.name, tier.cfg.Tier)
			}
			for h := range tier.where {
				want[h] |= tier.cfg.Tier.Mask()
			}
		}
		got := map[uint64]kvtier.Mask{}
		for _, b := range dump[w.name].Blocks {
			got[b.Hash] = b.Tiers
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: the index holds %d blocks, the worker %d: they differ", w.name, len(got), len(want))
		}
	}
}
