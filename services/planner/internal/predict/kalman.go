package predict

// Kalman is a local-linear-trend Kalman filter: the signal is a level that
// moves by a trend each interval, both perturbed by random noise, seen
// through measurement noise. Its gains follow from the noise ratios alone
// and settle within a few intervals; the first observation fixes the
// level, and a diffuse prior on the trend lets the second fix the trend,
// as Holt's method does.
//
// Variances are in units of the measurement noise's, which cancels out of
// the gains: the filter behaves the same whatever the signal's scale.
type Kalman struct {
	q [2]float64 // level and trend noise
	n int
	x [2]float64    // level, trend
	p [2][2]float64 // state covariance
}

// diffuse is the prior variance of the trend: large enough against the
// measurement noise (1) that the second observation sets it.
const diffuse = 1e6

// NewKalman is a Kalman predictor with level and trend noise variances
// relative to the measurement noise's; both must be positive.
func NewKalman(levelNoise, trendNoise float64) *Kalman {
	return &Kalman{q: [2]float64{levelNoise, trendNoise}}
}

// Observe records the value of the interval that just ended.
func (k *Kalman) Observe(v float64) {
	if !usable(v) {
		return
	}
	defer func() { k.n++ }()
	if k.n == 0 {
		k.x = [2]float64{v, 0}
		k.p = [2][2]float64{{1, 0}, {0, diffuse}}
		return
	}
	// Time update: x = F x, P = F P Fᵀ + Q with F = [[1 1] [0 1]].
	x, p := k.x, k.p
	x = [2]float64{x[0] + x[1], x[1]}
	p = [2][2]float64{
		{p[0][0] + p[0][1] + p[1][0] + p[1][1] + k.q[0], p[0][1] + p[1][1]},
		{p[1][0] + p[1][1], p[1][1] + k.q[1]},
	}
	// Measurement update with H = [1 0] and unit measurement noise.
	s := p[0][0] + 1
	g := [2]float64{p[0][0] / s, p[1][0] / s}
	y := v - x[0]
	x = [2]float64{x[0] + g[0]*y, x[1] + g[1]*y}
	p = [2][2]float64{
		{(1 - g[0]) * p[0][0], (1 - g[0]) * p[0][1]},
		{p[1][0] - g[1]*p[0][0], p[1][1] - g[1]*p[0][1]},
	}
	k.x, k.p = x, p
}

// Predict is the next interval's value, ≥ 0; 0 before any observation.
func (k *Kalman) Predict() float64 {
	if k.n == 0 {
		return 0
	}
	return max(0, k.x[0]+k.x[1])
}

// gain is the level gain of the last update: with unit measurement noise
// the posterior level variance P/(P+1) equals it.
func (k *Kalman) gain() float64 { return k.p[0][0] }
