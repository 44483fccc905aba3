package predict

import (
	"math"
	"testing"
)

// kinds are the predictors every contract test runs against.
var kinds = []string{
	"constant",
	"holt-winters",
	"holt-winters:season=4",
	"kalman",
}

func build(t *testing.T, spec string) Predictor {
	t.Helper()
	p, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return p
}

// TestContract runs the Predictor contract against every kind: 0 before
// data, never negative, non-finite observations ignored, a steady signal
// predicted as itself.
func TestContract(t *testing.T) {
	t.Parallel()
	for _, spec := range kinds {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			p := build(t, spec)
			if got := p.Predict(); got != 0 {
				t.Errorf("Predict before any observation = %v, want 0", got)
			}
			for range 40 {
				p.Observe(7)
			}
			if got := p.Predict(); math.Abs(got-7) > 1e-6 {
				t.Errorf("steady 7: Predict = %v, want 7", got)
			}
			for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				p.Observe(v)
			}
			if got := p.Predict(); math.Abs(got-7) > 1e-6 {
				t.Errorf("after non-finite observations: Predict = %v, want 7", got)
			}
			// A steep fall to zero and below: a trend would carry the
			// prediction negative.
			for v := 7.0; v > -20; v -= 3 {
				p.Observe(max(v, 0))
				if got := p.Predict(); got < 0 || math.IsNaN(got) {
					t.Fatalf("Predict = %v after observing %v, want ≥ 0", got, max(v, 0))
				}
			}
			p.Observe(-5)
			if got := p.Predict(); got < 0 {
				t.Errorf("Predict = %v after a negative observation, want ≥ 0", got)
			}
		})
	}
}

func TestConstantTracks(t *testing.T) {
	t.Parallel()
	p := build(t, "constant")
	for _, v := range []float64{3, 9, 1, 0, 4.5} {
		p.Observe(v)
		if got := p.Predict(); got != v {
			t.Errorf("after %v: Predict = %v", v, got)
		}
	}
}

// TestRampError: after a flat stretch the signal ramps; the trend
// predictors' error goes to zero, the constant one lags by a step for ever.
func TestRampError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    string
		wantErr float64 // final absolute error at most
	}{
		{"holt-winters", 1e-3},
		{"kalman", 1e-3},
		{"constant", 2}, // exactly one step behind
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			p := build(t, tt.spec)
			signal := func(i int) float64 { return 10 + 2*float64(max(0, i-20)) }
			var errAt [3]float64 // at 5, 15 and 60 intervals into the ramp
			for i := range 80 {
				p.Observe(signal(i))
				e := math.Abs(p.Predict() - signal(i+1))
				switch i - 20 {
				case 5:
					errAt[0] = e
				case 15:
					errAt[1] = e
				case 60:
					errAt[2] = e
				}
			}
			if errAt[2] > tt.wantErr+1e-9 {
				t.Errorf("error 60 intervals into the ramp = %v, want ≤ %v", errAt[2], tt.wantErr)
			}
			if tt.spec != "constant" && !(errAt[1] < errAt[0]) {
				t.Errorf("error not shrinking: %v at 5 intervals, %v at 15", errAt[0], errAt[1])
			}
		})
	}
}

func TestHoltFollowsRampAtOnce(t *testing.T) {
	t.Parallel()
	p := build(t, "holt-winters")
	for i := range 10 {
		p.Observe(5 + 3*float64(i))
		if i >= 1 {
			if got, want := p.Predict(), 5+3*float64(i+1); math.Abs(got-want) > 1e-9 {
				t.Errorf("after %d observations Predict = %v, want %v", i+1, got, want)
			}
		}
	}
}

// TestSeasonalBeatsConstant: after two seasons of warm-up, seasonal
// holt-winters predicts a square wave and a sine wave far better than the
// last value does.
func TestSeasonalBeatsConstant(t *testing.T) {
	t.Parallel()
	const m = 12
	tests := []struct {
		name   string
		signal func(i int) float64
	}{
		{"square", func(i int) float64 {
			if i%m < m/2 {
				return 10
			}
			return 2
		}},
		{"sine", func(i int) float64 { return 6 + 4*math.Sin(2*math.Pi*float64(i)/m) }},
		{"sine on a ramp", func(i int) float64 { return 6 + 0.1*float64(i) + 4*math.Sin(2*math.Pi*float64(i)/m) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hw := build(t, "holt-winters:alpha=0.5,beta=0.3,gamma=0.1,season=12")
			c := build(t, "constant")
			var hwErr, cErr float64
			for i := range 6 * m {
				hw.Observe(tt.signal(i))
				c.Observe(tt.signal(i))
				if i >= 2*m-1 { // predictions of the third season on
					next := tt.signal(i + 1)
					hwErr += math.Abs(hw.Predict() - next)
					cErr += math.Abs(c.Predict() - next)
				}
			}
			if !(hwErr < cErr/4) {
				t.Errorf("seasonal error %v, constant %v: want under a quarter", hwErr, cErr)
			}
		})
	}
}

// TestKalmanGain pins the package doc's claim about the default noise
// ratios' steady-state level gain.
func TestKalmanGain(t *testing.T) {
	t.Parallel()
	k := NewKalman(DefaultLevelNoise, DefaultTrendNoise)
	for range 200 {
		k.Observe(1)
	}
	if g := k.gain(); g < 0.35 || g > 0.45 {
		t.Errorf("steady-state level gain %v, want about 0.4", g)
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	a, b := Default(), build(t, DefaultSpec)
	for _, v := range []float64{1, 4, 2, 8, 5} {
		a.Observe(v)
		b.Observe(v)
		if a.Predict() != b.Predict() {
			t.Fatalf("Default and Parse(DefaultSpec) disagree: %v, %v", a.Predict(), b.Predict())
		}
	}
}
