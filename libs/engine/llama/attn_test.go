package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

func needSIMD(t *testing.T) {
	t.Helper()
	if !hasFMAKernel {
		t.Skip("no AVX2+FMA kernels on this CPU")
	}
}

func ulps(a, b float32) float64 {
	return math.Abs(float64(int64(math.Float32bits(a)) - int64(math.Float32bits(b))))
}

// TestExpf8: within 2 ulp of e^x over the normal range, 0 below -86.9,
// +Inf above ln(MaxFloat32), NaN for NaN; a and b apply before the
// exponential.
func TestExpf8(t *testing.T) {
	t.Parallel()
	needSIMD(t)
	rng := rand.New(rand.NewPCG(2, 2))
	xs := make([]float32, 1<<16)
	for i := range xs {
		xs[i] = -86.9 + rng.Float32()*(88.7+86.9)
	}
	copy(xs, []float32{0, 1, -1, 1e-8, -1e-8, 88.7, -86.89, -30, 20})
	got := append([]float32(nil), xs...)
	expf8(&got[0], len(got), 1, 0)
	worst := 0.0
	for i, x := range xs {
		want := float32(math.Exp(float64(x)))
		if u := ulps(got[i], want); u > worst {
			worst = u
			if u > 2 {
				t.Fatalf("expf8(%v) = %v, want %v (%v ulp)", x, got[i], want, u)
			}
		}
	}
	t.Logf("worst error %v ulp over %d inputs", worst, len(xs))

	edge := []float32{-87, -100, float32(math.Inf(-1)), 88.73, 200, float32(math.Inf(1)), float32(math.NaN()), 0}
	want := []float32{0, 0, 0, float32(math.Inf(1)), float32(math.Inf(1)), float32(math.Inf(1)), float32(math.NaN()), 1}
	expf8(&edge[0], 8, 1, 0)
	for i := range edge {
		if edge[i] != want[i] && !(math.IsNaN(float64(edge[i])) && math.IsNaN(float64(want[i]))) {
			t.Errorf("edge %d: got %v, want %v", i, edge[i], want[i])
		}
	}

	ab := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	expf8(&ab[0], 8, -1, 0.5) // e^(0.5 - x)
	for i, v := range ab {
		if w := float32(math.Exp(0.5 - float64(i+1))); ulps(v, w) > 2 {
			t.Errorf("e^(0.5-%d) = %v, want %v", i+1, v, w)
		}
	}
}

func TestMaxSumDiv8(t *testing.T) {
	t.Parallel()
	needSIMD(t)
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{8, 16, 24, 64, 520} {
		x := make([]float32, n)
		m := float32(math.Inf(-1))
		var sum float64
		for i := range x {
			x[i] = rng.Float32()*20 - 10
			m = max(m, x[i])
			sum += float64(x[i])
		}
		if got := max8(&x[0], n); got != m {
			t.Fatalf("n=%d: max8 = %v, want %v", n, got, m)
		}
		if got := sum8(&x[0], n); math.Abs(float64(got)-sum) > 1e-4*float64(n) {
			t.Fatalf("n=%d: sum8 = %v, want %v", n, got, sum)
		}
		y := append([]float32(nil), x...)
		div8(&y[0], n, 3)
		for i := range y {
			if y[i] != x[i]/3 {
				t.Fatalf("n=%d: div8[%d] = %v, want %v", n, i, y[i], x[i]/3)
			}
		}
	}
}

// TestScoresWeighted8 checks the attention kernels against float64 sums
// over strided rows, for head sizes 8 and 48 and every count up to 16.
func TestScoresWeighted8(t *testing.T) {
	t.Parallel()
	needSIMD(t)
	rng := rand.New(rand.NewPCG(4, 4))
	for _, hs := range []int{8, 48} {
		stride := 3 * hs // rows of other heads in between, as in the cache
		kv := make([]float32, 16*stride)
		for i := range kv {
			kv[i] = rng.Float32()*2 - 1
		}
		q := make([]float32, hs)
		for i := range q {
			q[i] = rng.Float32()*2 - 1
		}
		scale := float32(math.Sqrt(float64(hs)))
		att := make([]float32, 16)
		scores8(&att[0], &q[0], hs, &kv[0], stride, 2, scale)
		for s := range 16 {
			var want float64
			for i := range hs {
				want += float64(q[i]) * float64(kv[s*stride+i])
			}
			want /= float64(scale)
			if math.Abs(float64(att[s])-want) > 1e-5 {
				t.Fatalf("hs=%d: score %d = %v, want %v", hs, s, att[s], want)
			}
		}
		for n := 1; n <= 16; n++ {
			out := make([]float32, hs)
			for i := range out {
				out[i] = 0.25
			}
			weighted8(&out[0], &att[0], n, &kv[0], stride, hs)
			for i := range hs {
				want := 0.25
				for s := range n {
					want += float64(att[s]) * float64(kv[s*stride+i])
				}
				if math.Abs(float64(out[i])-want) > 1e-5 {
					t.Fatalf("hs=%d n=%d: out[%d] = %v, want %v", hs, n, i, out[i], want)
				}
			}
		}
	}
}

// TestSIMDAttentionSelected: the SIMD kernel runs attention with the AVX2
// kernels where they apply (so the exactness tests of this package and of
// the engine cover them), and falls back where the head or block size
// does not fit them; both give the reference text.
func TestSIMDAttentionSelected(t *testing.T) {
	t.Parallel()
	e, err := NewTinyRandom(Stories260K, 7, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bind(t, e, 8)
	if e.simd != hasFMAKernel {
		t.Fatalf("simd = %v with block size 16, head size %d, AVX2+FMA %v", e.simd, e.c.HeadSize(), hasFMAKernel)
	}
	g, err := NewTinyRandom(Stories260K, 7, Options{Kernel: KernelGo})
	if err != nil {
		t.Fatal(err)
	}
	bind(t, g, 8)
	if g.simd || g.simdExp() {
		t.Fatal("KernelGo must keep run.c's loops")
	}
	// A block size the attention kernels cannot take: attention falls
	// back to the loops, SwiGLU keeps the SIMD exponentials (the same
	// arithmetic as at block size 16).
	o, err := NewTinyRandom(Stories260K, 7, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bindBlockSize(t, o, 64, 4)
	if o.simd || o.simdExp() != hasFMAKernel {
		t.Fatalf("block size 4: simd = %v, simdExp = %v; want false, %v", o.simd, o.simdExp(), hasFMAKernel)
	}
}

// TestAttentionSIMDMatchesLoops runs attend with the SIMD kernels and with
// the plain loops over the same random paged K/V for several head sizes, GQA
// groupings, block sizes and positions (every partial-block length), and
// requires the same outputs to within float32 rounding of differently
// ordered sums.
func TestAttentionSIMDMatchesLoops(t *testing.T) {
	t.Parallel()
	needSIMD(t)
	for _, tc := range []struct {
		dim, heads, kvHeads, block int
	}{
		{64, 8, 4, 16},  // stories260K
		{96, 2, 2, 8},   // head size 48
		{128, 8, 2, 32}, // head size 16, four query heads per KV head
	} {
		c := Config{Dim: tc.dim, HiddenDim: 2 * tc.dim, NLayers: 2, NHeads: tc.heads, NKVHeads: tc.kvHeads, VocabSize: 300, SeqLen: 80, SharedClassifier: true}
		e, err := NewTinyRandom(c, 3, Options{})
		if err != nil {
			t.Fatal(err)
		}
		nblocks := (c.SeqLen + tc.block - 1) / tc.block
		bindBlockSize(t, e, nblocks, tc.block)
		if !e.simd {
			t.Fatalf("%+v: SIMD attention not selected", tc)
		}
		rng := rand.New(rand.NewPCG(uint64(tc.dim), uint64(tc.block)))
		for i := range e.kv {
			e.kv[i] = rng.Float32()*2 - 1
		}
		blocks := make([]int, nblocks)
		for i := range blocks {
			blocks[i] = nblocks - 1 - i // not in arena order
		}
		q := make([]float32, c.Dim)
		for i := range q {
			q[i] = rng.Float32()*2 - 1
		}
		att := make([]float32, roundUp8(c.SeqLen))
		want, got := make([]float32, c.Dim), make([]float32, c.Dim)
		for l := range c.NLayers {
			for pos := range c.SeqLen {
				e.attend(want, q, att, blocks, l, pos, false)
				e.attend(got, q, att, blocks, l, pos, true)
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-5+1e-4*math.Abs(float64(want[i])) {
						t.Fatalf("%+v layer %d pos %d: out[%d] = %v, loops %v", tc, l, pos, i, got[i], want[i])
					}
				}
			}
		}
	}
}
