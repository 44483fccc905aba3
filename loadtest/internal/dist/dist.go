// Package dist parses and samples the integer length distributions used by
// synthetic workloads ("fixed:512", "uniform:100,1000", "normal:512,64").
//
// Distributions are pure values: sampling takes the caller's *rand.Rand so a
// seeded run draws the same lengths whatever the scheduling order, and every
// sample is clamped to at least Min so a wide normal never yields an empty
// prompt or a zero max_tokens.
package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Kind names a distribution family.
type Kind string

// The supported families.
const (
	Fixed   Kind = "fixed"
	Uniform Kind = "uniform"
	Normal  Kind = "normal"
)

// Min is the smallest value any distribution yields.
const Min = 1

// Dist is a parsed distribution. For Fixed only A is used; for Uniform, A and
// B are the inclusive bounds; for Normal, A is the mean and B the standard
// deviation.
type Dist struct {
	Kind Kind    `json:"kind"`
	A    float64 `json:"a"`
	B    float64 `json:"b,omitempty"`
}

// Parse reads "N", "fixed:N", "uniform:LO,HI" or "normal:MEAN,STDDEV".
func Parse(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	kind, args, found := strings.Cut(s, ":")
	if !found {
		kind, args = string(Fixed), s
	}
	parts := strings.Split(args, ",")
	nums := make([]float64, 0, len(parts))
	for _, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return Dist{}, fmt.Errorf("distribution %q: bad number %q", s, p)
		}
		nums = append(nums, v)
	}
	d := Dist{Kind: Kind(strings.ToLower(strings.TrimSpace(kind)))}
	switch d.Kind {
	case Fixed:
		if len(nums) != 1 {
			return Dist{}, fmt.Errorf("distribution %q: fixed takes one value", s)
		}
		d.A = nums[0]
	case Uniform, Normal:
		if len(nums) != 2 {
			return Dist{}, fmt.Errorf("distribution %q: %s takes two values", s, d.Kind)
		}
		d.A, d.B = nums[0], nums[1]
	default:
		return Dist{}, fmt.Errorf("distribution %q: unknown kind %q (want fixed, uniform or normal)", s, kind)
	}
	return d, d.validate(s)
}

func (d Dist) validate(s string) error {
	switch {
	case d.A < Min && d.Kind != Normal:
		return fmt.Errorf("distribution %q: values must be >= %d", s, Min)
	case d.Kind == Uniform && d.B < d.A:
		return fmt.Errorf("distribution %q: upper bound below lower bound", s)
	case d.Kind == Normal && d.B < 0:
		return fmt.Errorf("distribution %q: negative standard deviation", s)
	case d.Kind == Normal && d.A < Min:
		return fmt.Errorf("distribution %q: mean must be >= %d", s, Min)
	case d.A > math.MaxInt32 || d.B > math.MaxInt32:
		return fmt.Errorf("distribution %q: value too large", s)
	}
	return nil
}

// Sample draws one value, never below Min.
func (d Dist) Sample(r *rand.Rand) int {
	var v float64
	switch d.Kind {
	case Uniform:
		lo, hi := int64(math.Round(d.A)), int64(math.Round(d.B))
		v = float64(lo + r.Int64N(hi-lo+1))
	case Normal:
		v = math.Round(d.A + d.B*r.NormFloat64())
	default:
		v = math.Round(d.A)
	}
	return max(Min, int(v))
}

// Mean is the distribution's nominal mean, before clamping.
func (d Dist) Mean() float64 {
	if d.Kind == Uniform {
		return (d.A + d.B) / 2
	}
	return d.A
}

// String renders the distribution in the syntax Parse reads.
func (d Dist) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	if d.Kind == Fixed || d.Kind == "" {
		return "fixed:" + f(d.A)
	}
	return string(d.Kind) + ":" + f(d.A) + "," + f(d.B)
}
