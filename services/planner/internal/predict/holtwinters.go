package predict

// HoltWinters is additive triple exponential smoothing: the prediction is
// level + trend + the seasonal offset of the next position in the season.
//
// Without a season it starts predicting at once: the first observation is
// the level, the second sets the trend to the step between them, so a
// linear ramp is followed exactly from the third interval on. With a
// season of m intervals the offsets need two whole seasons to be told
// apart from the trend: until 2m observations it predicts as Holt's
// method, then initialises the classical way (level and trend from the two
// seasons' means, each offset the mean of its two detrended values) and
// smooths all three from there.
type HoltWinters struct {
	alpha, beta, gamma float64
	season             int

	n            int // observations so far
	level, trend float64
	offsets      []float64 // by position in the season
	warm         []float64 // the first 2×season observations
	holt         *HoltWinters
}

// NewHoltWinters is a Holt-Winters predictor with smoothing constants in
// (0, 1] and a season of season intervals (0: none; at most MaxSeason).
// New validates its options; this constructor trusts them.
func NewHoltWinters(alpha, beta, gamma float64, season int) *HoltWinters {
	h := &HoltWinters{alpha: alpha, beta: beta, gamma: gamma, season: min(max(season, 0), MaxSeason)}
	if h.season > 0 {
		h.holt = NewHoltWinters(alpha, beta, gamma, 0)
	}
	return h
}

// Observe records the value of the interval that just ended.
func (h *HoltWinters) Observe(v float64) {
	if !usable(v) {
		return
	}
	defer func() { h.n++ }()
	switch m := h.season; {
	case m == 0:
		h.observeHolt(v)
	case h.n < 2*m:
		h.holt.Observe(v)
		h.warm = append(h.warm, v)
		if len(h.warm) == 2*m {
			h.initSeason()
		}
	default:
		j := h.n % m
		prev := h.level
		h.level = h.alpha*(v-h.offsets[j]) + (1-h.alpha)*(h.level+h.trend)
		h.trend = h.beta*(h.level-prev) + (1-h.beta)*h.trend
		h.offsets[j] = h.gamma*(v-h.level) + (1-h.gamma)*h.offsets[j]
	}
}

func (h *HoltWinters) observeHolt(v float64) {
	switch h.n {
	case 0:
		h.level = v
	case 1:
		h.level, h.trend = v, v-h.level
	default:
		prev := h.level
		h.level = h.alpha*v + (1-h.alpha)*(h.level+h.trend)
		h.trend = h.beta*(h.level-prev) + (1-h.beta)*h.trend
	}
}

// initSeason sets level, trend and offsets from the first two seasons.
func (h *HoltWinters) initSeason() {
	m := h.season
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	a1, a2 := mean(h.warm[:m]), mean(h.warm[m:])
	h.trend = (a2 - a1) / float64(m)
	mid := float64(m-1) / 2 // a season's mean sits at its middle position
	h.offsets = make([]float64, m)
	for j := range m {
		d1 := h.warm[j] - (a1 + h.trend*(float64(j)-mid))
		d2 := h.warm[m+j] - (a2 + h.trend*(float64(j)-mid))
		h.offsets[j] = (d1 + d2) / 2
	}
	h.level = a2 + h.trend*mid // at the last observation
	h.warm, h.holt = nil, nil
}

// Predict is the next interval's value, ≥ 0; 0 before any observation.
func (h *HoltWinters) Predict() float64 {
	switch {
	case h.n == 0:
		return 0
	case h.holt != nil:
		return h.holt.Predict()
	case h.season > 0:
		return max(0, h.level+h.trend+h.offsets[h.n%h.season])
	}
	return max(0, h.level+h.trend)
}
