package engine

import (
	"testing"

	"switchyard.dev/libs/kvtier"
)

// Offload's admission policy is to copy every committed block into every
// tier below the arena that lacks it, as far as the tier's write budget
// allows: no block is held back for how likely it is to be used again.
// What that costs a tier is the bytes it is written per later hit, from
// Metrics().Tiers: Offloaded blocks of the engine's block bytes (the
// tier's own BytesIn) over the blocks Onboarded from it. Here a prompt is
// served again after others pushed it off the device, behind a host tier
// that keeps every block and behind one too small to: the disk tier is
// written every block either way, and read only in the second.
func TestTierBytesWrittenPerHit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		host     int // blocks
		hitsFrom kvtier.Tier
	}{
		{"host keeps everything", 256, kvtier.Host},
		{"host too small", 2, kvtier.Disk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := newExactRunner(t)
			e := start(t, tinyG1(hostTier(tc.host), diskTier(t.TempDir(), 256)), stories(t))
			for _, salt := range []int{41, 42, 43, 44} {
				x.run(e, salt)
				waitFor(t, "offloads to finish", e.offloadsDone)
			}
			x.evict(e, 41)
			n := len(tierBlocks(41))
			if got := x.run(e, 41); got.final.Usage.CachedPromptTokens != n*16 {
				t.Fatalf("%d prompt tokens cached; want the %d onboarded", got.final.Usage.CachedPromptTokens, n*16)
			}
			bb := int64(e.tiers.bb)
			for i, m := range e.Metrics().Tiers {
				st := e.tiers.list[i].t.Stats()
				if m.Offloaded == 0 || m.Offloaded*bb != int64(st.BytesIn) || m.Onboarded*bb != m.OnboardBytes {
					t.Errorf("%s: %d blocks offloaded, %d onboarded (%d bytes); the tier took %d bytes: they disagree",
						m.Tier, m.Offloaded, m.Onboarded, m.OnboardBytes, st.BytesIn)
				}
				want := int64(0)
				if m.Tier == tc.hitsFrom {
					want = int64(n)
				}
				if m.Onboarded != want {
					t.Errorf("%s: %d blocks onboarded; want %d", m.Tier, m.Onboarded, want)
				}
				if m.Onboarded == 0 {
					t.Logf("%s: %d blocks written (%d KiB), no hit", m.Tier, m.Offloaded, m.Offloaded*bb>>10)
				} else {
					t.Logf("%s: %d blocks written (%d KiB), %d hits: %.1f blocks (%d KiB) written per hit",
						m.Tier, m.Offloaded, m.Offloaded*bb>>10, m.Onboarded, float64(m.Offloaded)/float64(m.Onboarded), m.Offloaded*bb/m.Onboarded>>10)
				}
			}
		})
	}
}
