package policy

// correction is an EWMA of observed/expected latency ratios: how far the
// world sits from the profile. It starts at 1 (trust the profile) and
// stays within [MinCorrection, MaxCorrection]; each ratio is clamped to
// that range before it enters, so one wild interval moves it a bounded
// step.
type correction struct{ v float64 }

func newCorrection() correction { return correction{v: 1} }

func (c *correction) update(observed, expected, weight float64) {
	if !(observed > 0 && expected > 0) {
		return
	}
	r := clampf(observed/expected, MinCorrection, MaxCorrection)
	c.v = clampf(c.v+weight*(r-c.v), MinCorrection, MaxCorrection)
}

func clampf(v, lo, hi float64) float64 { return min(max(v, lo), hi) }
