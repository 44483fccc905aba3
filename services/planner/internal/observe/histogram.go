package observe

import (
	"math"
	"slices"
)

// Histogram is a latency distribution over one window: counts per bucket
// (not cumulative), bucket i holding samples in (Bounds[i-1], Bounds[i]],
// the last bound +Inf.
type Histogram struct {
	Bounds []float64
	Counts []float64
}

// Total is the number of samples.
func (h Histogram) Total() float64 {
	t := 0.0
	for _, c := range h.Counts {
		t += c
	}
	return t
}

// Quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear within the bucket that holds it, the lower bound of the
// first bucket taken as 0, and the highest finite bound for the +Inf
// bucket. 0 without samples.
func (h Histogram) Quantile(q float64) float64 {
	total := h.Total()
	if total == 0 || len(h.Bounds) == 0 {
		return 0
	}
	rank := q * total
	seen := 0.0
	for i, c := range h.Counts {
		if seen+c >= rank && c > 0 {
			lo := 0.0
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			hi := h.Bounds[i]
			if math.IsInf(hi, 1) {
				return lo
			}
			return lo + (hi-lo)*(rank-seen)/c
		}
		seen += c
	}
	if len(h.Bounds) < 2 { // rounding left the rank past every sample, and only +Inf bounds them
		return 0
	}
	return h.Bounds[len(h.Bounds)-2]
}

// FractionAbove estimates the share of samples above x, linear within the
// bucket that holds x.
func (h Histogram) FractionAbove(x float64) float64 {
	total := h.Total()
	if total == 0 {
		return 0
	}
	above := 0.0
	for i, c := range h.Counts {
		lo := 0.0
		if i > 0 {
			lo = h.Bounds[i-1]
		}
		hi := h.Bounds[i]
		switch {
		case lo >= x:
			above += c
		case hi > x && !math.IsInf(hi, 1):
			above += c * (hi - x) / (hi - lo)
		case math.IsInf(hi, 1):
			above += c
		}
	}
	return above / total
}

// Add adds o's counts into h (same bounds; h takes o's when empty).
func (h *Histogram) Add(o Histogram) {
	if len(h.Bounds) == 0 {
		h.Bounds, h.Counts = slices.Clone(o.Bounds), slices.Clone(o.Counts)
		return
	}
	if !slices.Equal(h.Bounds, o.Bounds) {
		return // another layout (a frontend of another version): left out
	}
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
}

// sub returns h − prev, bucket by bucket; a reset (a count that went down)
// gives h itself.
func (h Histogram) sub(prev Histogram) Histogram {
	if !slices.Equal(h.Bounds, prev.Bounds) {
		return h
	}
	out := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts))}
	for i := range h.Counts {
		d := h.Counts[i] - prev.Counts[i]
		if d < 0 {
			return h
		}
		out.Counts[i] = d
	}
	return out
}
