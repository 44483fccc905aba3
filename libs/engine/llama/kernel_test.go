package llama

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"switchyard.dev/libs/engine/executor"
)

func randSlice(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = rng.Float32()*2 - 1
	}
	return out
}

// TestMatmulBatchInvariant checks that a row's result is bit-identical
// whether it is computed alone or inside a batch, for both kernels.
func TestMatmulBatchInvariant(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	const n, p = 64, 172
	w := randSlice(rng, n*p)
	for _, k := range []Kernel{KernelSIMD, KernelGo} {
		for _, m := range []int{1, 2, 3, 5, 16, 33} {
			x := randSlice(rng, m*n) // here: the subtests run in parallel
			t.Run(fmt.Sprintf("%v/m%d", k, m), func(t *testing.T) {
				t.Parallel()
				all := make([]float32, m*p)
				k.matmul()(all, x, w, m, n, p)
				one := make([]float32, p)
				for i := range m {
					k.matmul()(one, x[i*n:(i+1)*n], w, 1, n, p)
					for j := range p {
						if one[j] != all[i*p+j] {
							t.Fatalf("row %d col %d: alone %v, batched %v", i, j, one[j], all[i*p+j])
						}
					}
				}
			})
		}
	}
}

func TestMatmulKernelsAgree(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	const m, n, p = 4, 64, 64
	x, w := randSlice(rng, m*n), randSlice(rng, n*p)
	a, b := make([]float32, m*p), make([]float32, m*p)
	matmulSIMD(a, x, w, m, n, p)
	matmulGo(b, x, w, m, n, p)
	for i := range a {
		d := a[i] - b[i]
		if d > 1e-4 || d < -1e-4 {
			t.Fatalf("element %d: simd %v go %v", i, a[i], b[i])
		}
	}
	if KernelGo.String() != "go" || Kernel(7).String() != "kernel(7)" {
		t.Fatal("kernel names")
	}
}

func BenchmarkMatmul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, p = 64, 172
	w := randSlice(rng, n*p)
	for _, k := range []Kernel{KernelSIMD, KernelGo} {
		for _, m := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%v/m%d", k, m), func(b *testing.B) {
				x, dst := randSlice(rng, m*n), make([]float32, m*p)
				mm := k.matmul()
				for b.Loop() {
					mm(dst, x, w, m, n, p)
				}
				b.ReportMetric(float64(2*m*n*p)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestThreadsDoNotChangeResults runs the same batch with serial and
// parallel attention.
func TestThreadsDoNotChangeResults(t *testing.T) {
	t.Parallel()
	out := func(threads int) []uint32 {
		e, err := NewTinyRandom(small, 5, Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		bind(t, e, 16)
		e.parallelMACs = 1 // split even this small step
		b := &executor.Batch{}
		for i := range 8 {
			tokens := make([]uint32, 16)
			for j := range tokens {
				tokens[j] = uint32(3 + (i*17+j*5)%290)
			}
			b.Items = append(b.Items, executor.Item{Tokens: tokens, End: 16, Blocks: []int{i}, Sample: true})
		}
		if err := e.Execute(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		if threads > 1 && e.s.workers < 2 {
			t.Fatalf("expected parallel attention, got %d workers", e.s.workers)
		}
		var toks []uint32
		for _, it := range b.Items {
			toks = append(toks, it.Out)
		}
		return toks
	}
	a, b := out(1), out(4)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("item %d: serial %d, parallel %d", i, a[i], b[i])
		}
	}
}

// TestAttentionLoopsInOrder: scores and weighted equal the plain loops
// (each sum in index or position order) bit for bit at any head size.
func TestAttentionLoopsInOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	fill := func(n int) []float32 { return randSlice(rng, n) }
	for _, hs := range []int{8, 12, 16, 48, 64, 5} {
		for _, n := range []int{1, 3, 4, 7, 33} {
			const stride = 96
			q, kb, att := fill(hs), fill(n*stride), fill(n)
			got, want := make([]float32, n), make([]float32, n)
			scores(got, q, kb, stride, 2.5)
			for s := range want {
				var sum float32
				for i := range hs {
					sum += q[i] * kb[s*stride+i]
				}
				want[s] = sum / 2.5
			}
			if !slices.Equal(got, want) {
				t.Fatalf("scores hs=%d n=%d: %v, want %v", hs, n, got, want)
			}
			out, ref := fill(hs), []float32(nil)
			ref = append(ref, out...)
			weighted(out, att, kb, stride)
			for s, a := range att {
				for i := range ref {
					ref[i] += a * kb[s*stride+i]
				}
			}
			if !slices.Equal(out, ref) {
				t.Fatalf("weighted hs=%d n=%d: %v, want %v", hs, n, out, ref)
			}
		}
	}
}
