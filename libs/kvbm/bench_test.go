package kvbm_test

import (
	"fmt"
	"testing"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/tiertest"
	"switchyard.dev/libs/nixl/arena"
)

// Block sizes: 64 KiB, and 2 MiB (a 16-token block of Llama-3-8B in fp16:
// 32 layers × 2 × 8 KV heads × 128 × 2 bytes × 16 tokens).
var benchSizes = []int{64 << 10, 2 << 20}

const benchBlocks = 64

// BenchmarkMemcpy is the baseline of the host tier: one thread copying a
// block between two pre-faulted arenas, as G1 ↔ G2 moves do.
func BenchmarkMemcpy(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			src, dst := prefaulted(b, size*benchBlocks), prefaulted(b, size*benchBlocks)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				off := (i % benchBlocks) * size
				copy(dst[off:off+size], src[off:off+size])
				i++
			}
		})
	}
}

func prefaulted(b *testing.B, n int) []byte {
	a, err := arena.Map(n)
	if err != nil {
		b.Fatal(err)
	}
	a.Prefault()
	b.Cleanup(func() { _ = a.Close() })
	return a.Bytes()
}

// BenchmarkTier: Put of new blocks (evicting once full) and Get of held
// ones, per tier and block size.
func BenchmarkTier(b *testing.B) {
	for _, size := range benchSizes {
		tiers := map[string]func(b *testing.B) kvbm.Tier{
			"host": func(b *testing.B) kvbm.Tier {
				h, err := kvbm.NewHost(kvbm.HostConfig{Blocks: benchBlocks, BlockBytes: size})
				if err != nil {
					b.Fatal(err)
				}
				return h
			},
			"disk": func(b *testing.B) kvbm.Tier {
				d, err := kvbm.OpenDisk(kvbm.DiskConfig{Dir: b.TempDir(), Blocks: benchBlocks, BlockBytes: size, MaxTokens: 16})
				if err != nil {
					b.Fatal(err)
				}
				return d
			},
		}
		for _, name := range []string{"host", "disk"} {
			b.Run(fmt.Sprintf("%s/%dKiB/put", name, size>>10), func(b *testing.B) {
				tier := tiers[name](b)
				defer func() { _ = tier.Close() }()
				src := prefaulted(b, size*benchBlocks) // as many blocks as the memcpy loop walks
				b.SetBytes(int64(size))
				i := 0
				for b.Loop() {
					off := (i % benchBlocks) * size
					if _, err := tier.Put(b.Context(), tiertest.Meta(i), src[off:off+size]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run(fmt.Sprintf("%s/%dKiB/get", name, size>>10), func(b *testing.B) {
				tier := tiers[name](b)
				defer func() { _ = tier.Close() }()
				data := prefaulted(b, size)
				for i := range benchBlocks {
					if _, err := tier.Put(b.Context(), tiertest.Meta(i), data); err != nil {
						b.Fatal(err)
					}
				}
				dst := prefaulted(b, size*benchBlocks)
				b.SetBytes(int64(size))
				i := 0
				for b.Loop() {
					off := (i % benchBlocks) * size
					if _, err := tier.Get(b.Context(), tiertest.Meta(i%benchBlocks).Hash, dst[off:off+size]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
