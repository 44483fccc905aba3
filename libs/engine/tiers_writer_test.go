package engine

import (
	"context"
	"testing"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvtier"
)

// gatedTier is a real disk tier whose writes wait for the test to let
// them through: a store that is slow to take blocks.
type gatedTier struct {
	kvbm.Tier
	gate chan struct{}
}

func (g *gatedTier) Put(ctx context.Context, m kvbm.Meta, data []byte) (bool, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return g.Tier.Put(ctx, m, data)
}

// A slow tier never holds back offload into host memory: with the disk's
// writes stalled, every committed block still reaches the host tier, the
// disk's writes in flight stop at writeDepth (the rest counted as
// WriteBehind), and once the disk takes them they land there too.
func TestTierSlowWritesDoNotHoldBackHost(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	slow := TierConfig{Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
		d, err := diskTier(t.TempDir(), 256).Open(bb, on)
		return &gatedTier{Tier: d, gate: gate}, err
	}}
	e := start(t, Config{BlockSize: 16, NumBlocks: 256, Tiers: []TierConfig{hostTier(256), slow}}, stories(t))
	a := prompt(16*20+1, 41) // 20 whole blocks
	run(t, e, Request{Prompt: a, Stop: StopParams{MaxTokens: 4, IgnoreEOS: true}})
	tier := func(k kvtier.Tier) TierMetrics {
		for _, m := range e.Metrics().Tiers {
			if m.Tier == k {
				return m
			}
		}
		t.Fatalf("no %v tier", k)
		return TierMetrics{}
	}
	waitFor(t, "the prompt's blocks in host memory", func() bool { return tier(kvtier.Host).Blocks >= 20 })
	waitFor(t, "the disk's writes at their limit", func() bool { return tier(kvtier.Disk).WriteBehind > 0 })
	if d := tier(kvtier.Disk); d.Blocks != 0 || d.Offloaded != 0 {
		t.Fatalf("disk %+v while its writes are stalled", d)
	}
	close(gate)
	waitFor(t, "offloads to finish", e.offloadsDone)
	if d := tier(kvtier.Disk); d.Offloaded != writeDepth || d.Offloaded+d.WriteBehind < 20 {
		t.Fatalf("disk %+v; want the %d staged writes landed and the rest counted behind", d, writeDepth)
	}
}
