package nixltest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
)

// BenchSizes are the transfer sizes every backend is measured at.
var BenchSizes = []int{64 << 10, 1 << 20, 16 << 20}

// BenchDepth transfers are kept in flight for bandwidth (and raw
// baselines keep as many calls in flight, RawWindow).
const BenchDepth = 4

// PerftestWindow is the depth of the Perftest benchmarks: transfers kept in
// flight, as ucx_perftest keeps sends outstanding. (perfcompare.sh leaves
// perftest's own limit, -O, at its default; -O 1 and -O 10 measured alike
// at 64 KiB over sm, 10.2-11.9 GB/s. Its -w, also 10 there, is perftest's
// warm-up count.)
const PerftestWindow = 10

// Bench runs the bandwidth and latency benchmarks: WRITE of one descriptor
// per transfer. Bandwidth keeps BenchDepth transfers in flight; latency
// runs one at a time, so ns/op is the post-to-completion time; Perftest
// repeats ucx_perftest's pattern (PerftestWindow in flight, one buffer)
// for scripts/perfcompare.sh.
func Bench(b *testing.B, setup Setup) {
	for _, size := range BenchSizes {
		b.Run(fmt.Sprintf("Bandwidth/%s", SizeName(size)), func(b *testing.B) { benchWrite(b, setup, size, BenchDepth, false) })
	}
	for _, size := range BenchSizes {
		b.Run(fmt.Sprintf("Latency/%s", SizeName(size)), func(b *testing.B) { benchWrite(b, setup, size, 1, false) })
	}
	for _, size := range BenchSizes {
		b.Run(fmt.Sprintf("Perftest/%s", SizeName(size)), func(b *testing.B) { benchWrite(b, setup, size, PerftestWindow, true) })
	}
	for _, bb := range BenchBlockBytes {
		b.Run(fmt.Sprintf("Blocks/%dx%dB", BenchBlocks, bb), func(b *testing.B) { benchBlocks(b, setup, BenchBlocks, bb) })
	}
}

// BenchBlocks and BenchBlockBytes shape the Blocks benchmarks: one WRITE
// of BenchBlocks scattered descriptors at a time, as a KV import of that
// many blocks is. 64 bytes is a block of the sim workers' arenas (make
// bench's 4 bytes a token), where the cost is the transport's per
// descriptor; 16 KiB a block of a small real model's layer.
var (
	BenchBlocks     = 512
	BenchBlockBytes = []int{64, 16 << 10}
)

// benchBlocks posts one transfer of n descriptors of size bytes at a time:
// every other block slot of each arena, in order locally and shuffled on
// the target, so no two descriptors are adjacent in memory.
func benchBlocks(b *testing.B, setup Setup, n, size int) {
	init, target := pair(b, setup, max(2*n*size, arena.HugePage))
	local := make([]nixl.Desc, n)
	remote := make([]nixl.Desc, n)
	perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
	for i := range n {
		local[i] = nixl.Desc{Region: init.region, Offset: uint64(2 * i * size), Len: uint64(size)}
		remote[i] = nixl.Desc{Region: target.region, Offset: uint64(2 * perm[i] * size), Len: uint64(size)}
	}
	req := nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: local, Remote: remote}
	if err := post(b, init.agent, req); err != nil { // connect, fault pages in
		b.Fatal(err)
	}
	b.SetBytes(int64(n * size))
	b.ResetTimer()
	Window(b, init.agent, []nixl.XferRequest{req})
}

// SizeName names a benchmark size: "64KiB", "1MiB".
func SizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// benchWrite keeps depth WRITEs of size bytes in flight. Each slot has its
// own buffers, as KV blocks do, unless oneBuffer: then every transfer
// reads and writes the same size bytes on both sides, as ucx_perftest's
// bandwidth tests do (its numbers are for cache-warm buffers; comparing
// them with spread buffers measures memory, not the transport).
func benchWrite(b *testing.B, setup Setup, size, depth int, oneBuffer bool) {
	slots := depth
	if oneBuffer {
		slots = 1
	}
	// The arenas are at least a huge page, as KV arenas are: a transfer
	// is a block inside a large, huge-page backed arena (package arena).
	init, target := pair(b, setup, max(size*slots, arena.HugePage))
	reqs := make([]nixl.XferRequest, depth)
	for i := range reqs {
		off := uint64(i % slots * size)
		reqs[i] = nixl.XferRequest{Op: nixl.Write, Peer: "target",
			Local:  []nixl.Desc{{Region: init.region, Offset: off, Len: uint64(size)}},
			Remote: []nixl.Desc{{Region: target.region, Offset: off, Len: uint64(size)}}}
	}
	// Warm up: connect and fault the pages in on both sides.
	for _, r := range reqs {
		if err := post(b, init.agent, r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	Window(b, init.agent, reqs)
}

// Window posts b.N transfers from a, cycling through reqs with one in
// flight per element, and waits for the last. A plain b.N loop, not
// b.Loop: the timer must include draining the last transfers.
func Window(b *testing.B, a *nixl.Agent, reqs []nixl.XferRequest) {
	ctx := ctxT(b)
	inflight := make([]*nixl.Xfer, len(reqs))
	for i := range b.N {
		slot := i % len(reqs)
		if x := inflight[slot]; x != nil {
			if err := x.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		x, err := a.Post(reqs[slot])
		if err != nil {
			b.Fatal(err)
		}
		inflight[slot] = x
	}
	for _, x := range inflight {
		if x != nil {
			if err := x.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}
