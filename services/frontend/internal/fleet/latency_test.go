package fleet

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	t.Parallel()
	h := histogram{bounds: []float64{0.1, 0.2, 0.4, math.Inf(1)}, counts: []uint64{10, 10, 20, 20}}
	for _, tc := range []struct{ q, want float64 }{
		{0, 0},
		{0.25, 0.05}, // rank 5 of the 10 in (0, 0.1]
		{0.5, 0.1},   // rank 10: the top of the first bucket
		{0.75, 0.3},  // rank 15: halfway through (0.2, 0.4]
		{1, 0.4},
	} {
		if got := h.quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	inf := histogram{bounds: []float64{0.1, math.Inf(1)}, counts: []uint64{0, 5}}
	if got := inf.quantile(0.99); got != 0.1 {
		t.Errorf("all in +Inf: quantile = %v, want the last finite bound 0.1", got)
	}
	if got := (histogram{}).quantile(0.5); got != 0 {
		t.Errorf("empty: quantile = %v, want 0", got)
	}
}

func TestSinceReset(t *testing.T) {
	t.Parallel()
	b := []float64{1, math.Inf(1)}
	prev := histogram{bounds: b, counts: []uint64{5, 9}}
	now := histogram{bounds: b, counts: []uint64{1, 2}} // the registry was reset
	if d := now.since(prev); d.total() != 2 {
		t.Errorf("after a reset: %d samples, want the 2 counted since", d.total())
	}
	if d := (histogram{bounds: b, counts: []uint64{7, 12}}).since(prev); d.counts[0] != 2 || d.total() != 3 {
		t.Errorf("delta = %v, want [2 3]", d.counts)
	}
}

// FuzzQuantile: for any cumulative counts, quantiles are finite, within
// [0, the last finite bound], and grow with q.
func FuzzQuantile(f *testing.F) {
	f.Add(uint16(3), uint16(0), uint16(10), 0.5, 0.99)
	f.Add(uint16(0), uint16(0), uint16(1), 0.0, 1.0)
	f.Fuzz(func(t *testing.T, a, b, c uint16, q1, q2 float64) {
		if math.IsNaN(q1) || math.IsNaN(q2) {
			return
		}
		q1, q2 = min(max(q1, 0), 1), min(max(q2, 0), 1)
		if q1 > q2 {
			q1, q2 = q2, q1
		}
		n1 := uint64(a)
		n2 := n1 + uint64(b)
		n3 := n2 + uint64(c)
		h := histogram{bounds: []float64{0.5, 2, math.Inf(1)}, counts: []uint64{n1, n2, n3}}
		v1, v2 := h.quantile(q1), h.quantile(q2)
		if math.IsNaN(v1) || math.IsInf(v1, 0) || v1 < 0 || v2 > 2 || v1 > v2+1e-12 {
			t.Fatalf("counts %v: quantile(%v)=%v quantile(%v)=%v", h.counts, q1, v1, q2, v2)
		}
	})
}
