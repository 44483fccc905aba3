package mooncake

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RateProfile is a rate multiplier m(t) ≥ 0 over the elapsed real time t of
// a replay (not trace time): the product of one or more factors, each one of
//
//	const:M                    m = M
//	sin:PERIOD,LOW,HIGH        m = mean − amp·cos(2πt/PERIOD), mean and amp from
//	                           LOW ≤ HIGH: it starts at the trough LOW, peaks at
//	                           HIGH at PERIOD/2, and averages (LOW+HIGH)/2
//	step:AT,MULT               m = 1 before AT, MULT from AT on
//	piecewise:T0=M0,T1=M1,...  linear interpolation between the points, M0
//	                           before T0 and the last multiplier after the last
//	                           point; times strictly increasing
//
// joined by "*", e.g. "sin:10m,1,3*step:20m,3". Times use Go duration syntax
// (10m, 30s, 1h30m) and are ≥ 0; multipliers are finite numbers in
// [0, 1e6]. A multiplier of 0 over an interval means no arrivals then.
//
// The zero value is the constant 1 (no change). A RateProfile is immutable
// and safe to share; Warper turns one into the time mapping a replay uses.
type RateProfile struct {
	factors []factor
	// window is a common period of the factors' sinusoids, 0 when there
	// are none: the product of the sinusoids repeats with it, which lets a
	// Warper integrate one window and multiply instead of walking the whole
	// replay.
	window time.Duration
}

type factorKind uint8

const (
	kindConst factorKind = iota
	kindSin
	kindStep
	kindPiecewise
)

// factor is one term of a profile's product. Only the fields of its kind
// are set, so two parses of one string compare equal.
type factor struct {
	kind factorKind
	// mult is the multiplier of const, and of step from at on.
	mult float64
	at   time.Duration // step
	// period, low and high describe a sinusoid.
	period    time.Duration
	low, high float64
	points    []ratePoint // piecewise
}

type ratePoint struct {
	at   time.Duration
	mult float64
}

// Limits that keep a profile cheap to integrate exactly.
const (
	maxMultiplier = 1e6
	// maxFactors keeps the product of the linear pieces of piecewise
	// factors a polynomial (degree ≤ 8) that 8-point Gauss–Legendre
	// integrates exactly.
	maxFactors = 8
	// maxCells bounds the integration cells a Warper tabulates (8 bytes
	// each).
	maxCells = 1 << 20
)

// ParseRateProfile parses the syntax described at RateProfile. Errors name
// the factor at fault and why.
func ParseRateProfile(s string) (RateProfile, error) {
	if strings.TrimSpace(s) == "" {
		return RateProfile{}, errors.New("rate profile is empty")
	}
	parts := strings.Split(s, "*")
	if len(parts) > maxFactors {
		return RateProfile{}, fmt.Errorf("rate profile %q: %d factors, at most %d", s, len(parts), maxFactors)
	}
	var p RateProfile
	for i, part := range parts {
		f, err := parseFactor(strings.TrimSpace(part))
		if err != nil {
			return RateProfile{}, fmt.Errorf("rate profile factor %d %q: %w", i+1, strings.TrimSpace(part), err)
		}
		p.factors = append(p.factors, f)
	}
	var err error
	if p.window, err = commonPeriod(p.factors); err != nil {
		return RateProfile{}, fmt.Errorf("rate profile %q: %w", s, err)
	}
	if n := p.layout().cells; n > maxCells {
		return RateProfile{}, fmt.Errorf("rate profile %q: needs %.0f integration cells, at most %d: use longer sin periods or fewer ramps under a sinusoid",
			s, n, maxCells)
	}
	return p, nil
}

func parseFactor(part string) (factor, error) {
	if part == "" {
		return factor{}, errors.New("empty factor")
	}
	kind, args, ok := strings.Cut(part, ":")
	if !ok {
		return factor{}, errors.New("want KIND:ARGS with KIND const, sin, step or piecewise")
	}
	fields := strings.Split(args, ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	switch strings.TrimSpace(kind) {
	case "const":
		if len(fields) != 1 {
			return factor{}, fmt.Errorf("const takes one multiplier, got %d values", len(fields))
		}
		m, err := parseMult(fields[0])
		return factor{kind: kindConst, mult: m}, err
	case "sin":
		return parseSin(fields)
	case "step":
		if len(fields) != 2 {
			return factor{}, fmt.Errorf("step takes AT,MULT, got %d values", len(fields))
		}
		at, err := parseTime(fields[0])
		if err != nil {
			return factor{}, err
		}
		m, err := parseMult(fields[1])
		return factor{kind: kindStep, at: at, mult: m}, err
	case "piecewise":
		return parsePiecewise(fields)
	default:
		return factor{}, fmt.Errorf("unknown kind %q (want const, sin, step or piecewise)", strings.TrimSpace(kind))
	}
}

func parseSin(fields []string) (factor, error) {
	if len(fields) != 3 {
		return factor{}, fmt.Errorf("sin takes PERIOD,LOW,HIGH, got %d values", len(fields))
	}
	period, err := parseTime(fields[0])
	if err != nil {
		return factor{}, err
	}
	if period <= 0 {
		return factor{}, fmt.Errorf("period %q must be > 0", fields[0])
	}
	lo, err := parseMult(fields[1])
	if err != nil {
		return factor{}, err
	}
	hi, err := parseMult(fields[2])
	if err != nil {
		return factor{}, err
	}
	if lo > hi {
		return factor{}, fmt.Errorf("low multiplier %s > high %s", fields[1], fields[2])
	}
	return factor{kind: kindSin, period: period, low: lo, high: hi}, nil
}

func parsePiecewise(fields []string) (factor, error) {
	f := factor{kind: kindPiecewise, points: make([]ratePoint, 0, len(fields))}
	for i, fld := range fields {
		ts, ms, ok := strings.Cut(fld, "=")
		if !ok {
			return factor{}, fmt.Errorf("point %d %q: want TIME=MULT", i+1, fld)
		}
		at, err := parseTime(strings.TrimSpace(ts))
		if err != nil {
			return factor{}, fmt.Errorf("point %d: %w", i+1, err)
		}
		m, err := parseMult(strings.TrimSpace(ms))
		if err != nil {
			return factor{}, fmt.Errorf("point %d: %w", i+1, err)
		}
		if i > 0 && at <= f.points[i-1].at {
			return factor{}, fmt.Errorf("point %d: time %v is not after the previous point's %v", i+1, at, f.points[i-1].at)
		}
		f.points = append(f.points, ratePoint{at: at, mult: m})
	}
	return f, nil
}

func parseTime(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("time %q is negative", s)
	}
	return d, nil
}

func parseMult(s string) (float64, error) {
	m, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("multiplier %q is not a number", s)
	case math.IsNaN(m) || math.IsInf(m, 0):
		return 0, fmt.Errorf("multiplier %q is not finite", s)
	case m < 0:
		return 0, fmt.Errorf("multiplier %q is negative", s)
	case m > maxMultiplier:
		return 0, fmt.Errorf("multiplier %q exceeds %g", s, float64(maxMultiplier))
	}
	return m + 0, nil // -0 becomes 0, so it prints as 0
}

// String returns the profile in the syntax ParseRateProfile reads, with
// durations in time.Duration's form ("10m0s"); parsing it gives the same
// profile. The zero value prints as "const:1".
func (p RateProfile) String() string {
	if len(p.factors) == 0 {
		return "const:1"
	}
	parts := make([]string, len(p.factors))
	for i, f := range p.factors {
		parts[i] = f.String()
	}
	return strings.Join(parts, "*")
}

func (f factor) String() string {
	switch f.kind {
	case kindSin:
		return "sin:" + f.period.String() + "," + fmtMult(f.low) + "," + fmtMult(f.high)
	case kindStep:
		return "step:" + f.at.String() + "," + fmtMult(f.mult)
	case kindPiecewise:
		pts := make([]string, len(f.points))
		for i, pt := range f.points {
			pts[i] = pt.at.String() + "=" + fmtMult(pt.mult)
		}
		return "piecewise:" + strings.Join(pts, ",")
	default:
		return "const:" + fmtMult(f.mult)
	}
}

func fmtMult(m float64) string { return strconv.FormatFloat(m, 'g', -1, 64) }

// IsIdentity reports whether p is the zero value: no factors, m ≡ 1.
func (p RateProfile) IsIdentity() bool { return len(p.factors) == 0 }

// Multiplier is m(t) at t milliseconds into the replay.
func (p RateProfile) Multiplier(tMs float64) float64 {
	m := 1.0
	for i := range p.factors {
		m *= p.factors[i].value(tMs)
	}
	return m
}

func (f *factor) value(t float64) float64 {
	switch f.kind {
	case kindSin:
		return f.sinValue(t)
	case kindStep:
		if t < durMs(f.at) {
			return 1
		}
		return f.mult
	case kindPiecewise:
		return f.pieceValue(t)
	default:
		return f.mult
	}
}

func (f *factor) sinValue(t float64) float64 {
	period := durMs(f.period)
	// mean − amp·cos(2πt/P) written as low + (high−low)·sin²(πt/P): no
	// cancellation near a trough of 0, and reducing the phase first keeps
	// it accurate hours into a replay.
	s := math.Sin(math.Pi * math.Mod(t, period) / period)
	return f.low + (f.high-f.low)*s*s
}

func (f *factor) pieceValue(t float64) float64 {
	pts := f.points
	i, _ := slices.BinarySearchFunc(pts, t, func(pt ratePoint, t float64) int {
		if durMs(pt.at) < t {
			return -1
		}
		return 1
	})
	// pts[i-1] < t ≤ pts[i]
	switch {
	case i == len(pts):
		return pts[len(pts)-1].mult
	case i == 0 || durMs(pts[i].at) == t:
		return pts[i].mult
	}
	a, b := pts[i-1], pts[i]
	ta, tb := durMs(a.at), durMs(b.at)
	return a.mult + (b.mult-a.mult)*(t-ta)/(tb-ta)
}

// isSinusoid reports whether f varies as a sinusoid (one with LOW = HIGH is
// a constant).
func (f *factor) isSinusoid() bool { return f.kind == kindSin && f.low < f.high }

// commonPeriod is the least common multiple of the sinusoids' periods, 0
// when there are none. Periods are whole nanoseconds, so one always exists;
// it is refused when the integration cells of one window would exceed
// maxCells.
func commonPeriod(fs []factor) (time.Duration, error) {
	var longest, shortest time.Duration
	n := 0
	for i := range fs {
		if fs[i].isSinusoid() {
			n++
			longest = max(longest, fs[i].period)
			if shortest == 0 || fs[i].period < shortest {
				shortest = fs[i].period
			}
		}
	}
	if n == 0 {
		return 0, nil
	}
	// A window of k longest periods has cellsPerShortest(n) cells per
	// shortest period.
	maxK := int64(float64(maxCells) / float64(cellsPerShortest(n)) * float64(shortest) / float64(longest))
	for k := int64(1); k <= maxK && k <= math.MaxInt64/int64(longest); k++ {
		w := time.Duration(k) * longest
		if !slices.ContainsFunc(fs, func(f factor) bool { return f.isSinusoid() && w%f.period != 0 }) {
			return w, nil
		}
	}
	return 0, fmt.Errorf("sin periods %v to %v have no common period within %d cells: use periods that divide each other",
		shortest, longest, maxCells)
}

// cellsPerShortest is the number of integration cells per shortest sin
// period when n sinusoids multiply: the product's highest frequency grows
// with n, and a quarter of its period per cell keeps 8-point
// Gauss–Legendre within about 1e-15 of the integral.
func cellsPerShortest(n int) int { return 4 * n }

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
