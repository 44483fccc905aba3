package predict

import (
	"fmt"
	"math"
)

// Predictor forecasts a non-negative signal one interval ahead.
type Predictor interface {
	// Observe records the value of the interval that just ended.
	Observe(v float64)
	// Predict is the expected value of the next interval, ≥ 0; 0 before
	// any observation.
	Predict() float64
}

// Kinds of predictor, as New and Parse name them.
const (
	KindConstant    = "constant"
	KindHoltWinters = "holt-winters"
	KindKalman      = "kalman"
)

// DefaultSpec is the predictor the planner uses for the request rate
// unless told otherwise; see the package doc for why.
const DefaultSpec = KindHoltWinters

// Options configure a predictor; a zero field takes its default. Alpha,
// Beta, Gamma and Season apply to holt-winters; LevelNoise and TrendNoise
// to kalman.
type Options struct {
	// Alpha, Beta and Gamma are the smoothing constants of the level, the
	// trend and the seasonal offsets, each in (0, 1]: larger follows new
	// observations faster and smooths noise less.
	Alpha, Beta, Gamma float64
	// Season is the season length in intervals; 0 means no season.
	Season int
	// LevelNoise and TrendNoise are the variances of the random changes
	// of the level and of the trend per interval, relative to the
	// measurement noise's; larger trusts new observations more.
	LevelNoise, TrendNoise float64
}

// Defaults. With alpha 0.5 and beta 0.3, a ramp that starts after a flat
// stretch is predicted better than by the last value from its fifth
// interval, and within a tenth of one interval's rise from its eighth,
// while a steady signal's noise is still smoothed; gamma 0.1 moves
// a seasonal offset a tenth of the way per season, so one odd day does not
// rewrite the cycle. Kalman's noise ratios 0.1 and 0.01 give a steady-state
// level gain near 0.4, about holt-winters' alpha, with a trend that
// changes ten times more slowly than the level.
const (
	DefaultAlpha      = 0.5
	DefaultBeta       = 0.3
	DefaultGamma      = 0.1
	DefaultLevelNoise = 0.1
	DefaultTrendNoise = 0.01
)

// MaxSeason bounds the season length, which the predictor holds two of in
// memory while it warms up: a week of 10 s intervals fits with room.
const MaxSeason = 100_000

// Kinds lists the kinds New accepts.
func Kinds() []string { return []string{KindConstant, KindHoltWinters, KindKalman} }

// New builds a predictor of kind with opts; zero options take defaults.
func New(kind string, opts Options) (Predictor, error) {
	opts = opts.withDefaults()
	switch kind {
	case KindConstant:
		return &Constant{}, nil
	case KindHoltWinters:
		if err := opts.validateHoltWinters(); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		return NewHoltWinters(opts.Alpha, opts.Beta, opts.Gamma, opts.Season), nil
	case KindKalman:
		if err := opts.validateKalman(); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		return NewKalman(opts.LevelNoise, opts.TrendNoise), nil
	}
	return nil, fmt.Errorf("%w %q (want %s)", ErrUnknownKind, kind, kindList())
}

// Default is a new predictor of DefaultSpec with default options.
func Default() Predictor { return NewHoltWinters(DefaultAlpha, DefaultBeta, DefaultGamma, 0) }

func (o Options) withDefaults() Options {
	if o.Alpha == 0 {
		o.Alpha = DefaultAlpha
	}
	if o.Beta == 0 {
		o.Beta = DefaultBeta
	}
	if o.Gamma == 0 {
		o.Gamma = DefaultGamma
	}
	if o.LevelNoise == 0 {
		o.LevelNoise = DefaultLevelNoise
	}
	if o.TrendNoise == 0 {
		o.TrendNoise = DefaultTrendNoise
	}
	return o
}

func (o Options) validateHoltWinters() error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"alpha", o.Alpha}, {"beta", o.Beta}, {"gamma", o.Gamma}} {
		if !(c.v > 0 && c.v <= 1) {
			return fmt.Errorf("%w: %s=%v is outside (0,1]", ErrBadValue, c.name, c.v)
		}
	}
	if o.Season < 0 || o.Season > MaxSeason {
		return fmt.Errorf("%w: season=%d is outside [0, %d]", ErrBadValue, o.Season, MaxSeason)
	}
	return nil
}

func (o Options) validateKalman() error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"level", o.LevelNoise}, {"trend", o.TrendNoise}} {
		if !(c.v > 0) || math.IsInf(c.v, 0) {
			return fmt.Errorf("%w: %s=%v is not a positive number", ErrBadValue, c.name, c.v)
		}
	}
	return nil
}

// usable reports whether an observation may enter a predictor's state.
func usable(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
