package llama

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStripsMatchVek: the strip kernel computes what vek's AVX2 product
// computes, bit for bit (both are in-order fused multiply-add chains), for
// ragged shapes and any strip range.
func TestStripsMatchVek(t *testing.T) {
	t.Parallel()
	if !hasFMAKernel {
		t.Skip("no AVX2+FMA")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(n int) []float32 { return randSlice(rng, n) }
	for _, shape := range []struct{ m, n, p int }{{1, 64, 64}, {4, 64, 32}, {5, 64, 172}, {16, 172, 64}, {7, 288, 1000}, {3, 1, 17}, {9, 48, 512}} {
		t.Run(fmt.Sprintf("%dx%dx%d", shape.m, shape.n, shape.p), func(t *testing.T) {
			x, w := fill(shape.m*shape.n), fill(shape.n*shape.p)
			want := make([]float32, shape.m*shape.p)
			matmulSIMD(want, x, w, shape.m, shape.n, shape.p)
			st := packStrips(w, shape.n, shape.p)
			got := make([]float32, shape.m*shape.p)
			half := st.count() / 2
			st.mul(got, x, shape.m, 0, half)
			st.mul(got, x, shape.m, half, st.count())
			if !slices.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("element %d (row %d col %d): strips %v, vek %v", i, i/shape.p, i%shape.p, got[i], want[i])
					}
				}
			}
		})
	}
}
