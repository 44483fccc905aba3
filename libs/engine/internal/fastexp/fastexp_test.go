package fastexp

import (
	"math"
	"testing"
)

// Exp agrees with math.Exp to within 2e-14 (relative) across its domain.
func TestExp(t *testing.T) {
	t.Parallel()
	for x := -104.0; x <= 89; x += 0.00137 {
		got, want := Exp(x), math.Exp(x)
		if rel := math.Abs(got-want) / want; rel > 2e-14 {
			t.Fatalf("Exp(%v) = %v, math.Exp %v (relative error %g)", x, got, want, rel)
		}
	}
}

func BenchmarkExp(b *testing.B) {
	var s float64
	for b.Loop() {
		for x := -20.0; x < 0; x += 0.02 {
			s += Exp(x)
		}
	}
	_ = s
}
