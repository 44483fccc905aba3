package mooncake

// bisectTolMs is the width at which bisect stops, 1 ps, unless float64
// resolution stops it first.
const bisectTolMs = 1e-9

// bisect returns a point of (lo, hi] within bisectTolMs of the first where
// ok holds, ok being false before it and true after. It keeps the inverse
// monotone whatever the rounding of ok: when ok₂ implies ok₁ (F(x) ≥ r₂
// implies F(x) ≥ r₁ for r₁ ≤ r₂), both runs take the same midpoints until
// the first where only ok₁ holds, so the result for ok₁ is never later.
func bisect(lo, hi float64, ok func(float64) bool) float64 {
	for hi-lo > bisectTolMs {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// gauss is the 8-point Gauss–Legendre quadrature of f over [a, b]: exact
// for polynomials of degree ≤ 15, and never negative for f ≥ 0.
func gauss(f func(float64) float64, a, b float64) float64 {
	if !(b > a) {
		return 0
	}
	nodes := [4]struct{ x, w float64 }{
		{0.1834346424956498, 0.3626837833783620},
		{0.5255324099163290, 0.3137066458778873},
		{0.7966664774136267, 0.2223810344533745},
		{0.9602898564975363, 0.1012285362903763},
	}
	mid, half := (a+b)/2, (b-a)/2
	sum := 0.0
	for _, n := range nodes {
		sum += n.w * (f(mid-half*n.x) + f(mid+half*n.x))
	}
	return sum * half
}
