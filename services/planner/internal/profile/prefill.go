package profile

// PrefillSeconds is the time one replica takes to prefill inputTokens new
// tokens of one request with nothing else running: piecewise-linear in the
// measured points, extrapolated linearly through the two nearest points
// past either end, and never below the smallest measured seconds per token
// times inputTokens (the fastest rate the replica ever showed), which keeps
// an extrapolation to short prompts from reaching zero or below. It is 0
// for inputTokens ≤ 0 or a profile without prefill points.
func (p *Profile) PrefillSeconds(inputTokens int) float64 {
	pts := p.Prefill
	if inputTokens <= 0 || len(pts) == 0 {
		return 0
	}
	x := float64(inputTokens)
	floor := x * minSecondsPerToken(pts)
	if len(pts) == 1 {
		return floor // one point: the rate is all we know
	}
	i := 0 // segment [i, i+1] to interpolate on, or the end one to extrapolate
	for i < len(pts)-2 && inputTokens > pts[i+1].InputTokens {
		i++
	}
	a, b := pts[i], pts[i+1]
	v := lerp(float64(a.InputTokens), a.Seconds, float64(b.InputTokens), b.Seconds, x)
	return max(v, floor)
}

// PrefillTokensPerSecond is the prefill throughput of one replica that
// prefills requests of isl new tokens back to back; 0 for isl ≤ 0.
func (p *Profile) PrefillTokensPerSecond(isl int) float64 {
	s := p.PrefillSeconds(isl)
	if s <= 0 {
		return 0
	}
	return float64(isl) / s
}

func minSecondsPerToken(pts []PrefillPoint) float64 {
	r := pts[0].Seconds / float64(pts[0].InputTokens)
	for _, pt := range pts[1:] {
		r = min(r, pt.Seconds/float64(pt.InputTokens))
	}
	return r
}

// lerp is the line through (x0, y0) and (x1, y1) at x; x0 ≠ x1.
func lerp(x0, y0, x1, y1, x float64) float64 {
	return y0 + (y1-y0)*(x-x0)/(x1-x0)
}
