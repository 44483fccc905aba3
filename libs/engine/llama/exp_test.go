package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpf32MatchesMathExp(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 1))
	check := func(x float32) bool {
		want := float32(math.Exp(float64(x)))
		got := expf32(x)
		return got == want || (math.IsNaN(float64(got)) && math.IsNaN(float64(want)))
	}
	bad := 0
	for i := range 2_000_000 {
		var x float32
		switch i % 3 {
		case 0:
			x = -rng.Float32() * 30 // softmax range
		case 1:
			x = (rng.Float32()*2 - 1) * 12 // silu range
		default:
			x = (rng.Float32()*2 - 1) * 110 // everything, including the edges
		}
		if !check(x) {
			bad++
		}
	}
	for _, x := range []float32{0, -0, 1, -1, 88.7, 88.8, 89, -87.3, -103.9, -104.5, float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN())} {
		if !check(x) {
			t.Errorf("expf32(%v) = %v, want %v", x, expf32(x), float32(math.Exp(float64(x))))
		}
	}
	if bad > 2 {
		t.Fatalf("%d of 2e6 results differ from math.Exp", bad)
	}
}

func BenchmarkExp(b *testing.B) {
	xs := make([]float32, 1024)
	for i := range xs {
		xs[i] = -float32(i) / 40
	}
	b.Run("expf32", func(b *testing.B) {
		var s float32
		for b.Loop() {
			for _, x := range xs {
				s += expf32(x)
			}
		}
		_ = s
	})
	b.Run("math.Exp", func(b *testing.B) {
		var s float32
		for b.Loop() {
			for _, x := range xs {
				s += float32(math.Exp(float64(x)))
			}
		}
		_ = s
	})
}
