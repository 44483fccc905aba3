package kvbm_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
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

// BenchmarkFio is the disk tier's baseline, measured beside it: fio
// (Debian's package) writing and reading blocks of the tier's sizes with
// O_DIRECT, one at a time (psync, queue depth 1, as the tier's single
// writer and each onboarding call it), sequentially through a file of
// benchBlocks blocks for writes and at random for reads. Skipped without
// fio on PATH.
func BenchmarkFio(b *testing.B) {
	fio, err := exec.LookPath("fio")
	if err != nil {
		b.Skip("fio not on PATH (apt-get install fio)")
	}
	for _, size := range benchSizes {
		for _, rw := range []string{"write", "randread"} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, rw), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "fio.dat")
				args := func(rw string, n int) []string {
					return []string{"--name=kvbm", "--filename=" + path, "--ioengine=psync", "--direct=1", "--iodepth=1",
						"--bs=" + strconv.Itoa(size), "--size=" + strconv.Itoa(size*benchBlocks),
						"--io_size=" + strconv.Itoa(size*n), "--rw=" + rw, "--output-format=terse"}
				}
				if out, err := exec.Command(fio, args("write", benchBlocks)...).CombinedOutput(); err != nil { // lay the file out
					b.Fatalf("fio: %v: %s", err, out)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				if out, err := exec.Command(fio, args(rw, b.N)...).CombinedOutput(); err != nil {
					b.Fatalf("fio: %v: %s", err, out)
				}
			})
		}
	}
}
