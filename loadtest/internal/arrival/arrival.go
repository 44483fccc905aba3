// Package arrival generates open-loop request arrival schedules.
//
// A schedule is a pure, seeded sequence of offsets from the start of a run;
// the runner sleeps until each offset. Keeping the schedule free of clocks
// lets tests check the generated gaps statistically (mean, coefficient of
// variation) without ever measuring wall time.
//
// A rate profile (mooncake.RateProfile) varies the rate over the run by
// time-warping the constant-rate schedule, not by thinning it: the offsets
// of the constant-rate process are mapped through the profile's
// mooncake.Warper. For Poisson arrivals this is exactly an inhomogeneous
// Poisson process of intensity rate × m(t) (the time-change theorem); for
// constant arrivals the gaps become 1/(rate × m) as m varies. The random
// draws are those of the flat schedule, so a seed gives the same sequence
// of gaps with and without a profile, only stretched.
package arrival

import (
	"fmt"
	"math/rand/v2"
	"time"

	"switchyard.dev/libs/mooncake"
)

// Process names an inter-arrival distribution.
type Process string

// The supported processes.
const (
	// Poisson arrivals have exponentially distributed gaps (CV = 1), the
	// usual model of independent users.
	Poisson Process = "poisson"
	// Constant arrivals are evenly spaced (CV = 0).
	Constant Process = "constant"
)

// Schedule yields successive arrival offsets. It is not safe for concurrent
// use; the runner owns it.
type Schedule struct {
	process Process
	rate    float64
	rng     *rand.Rand
	warp    *mooncake.Warper
	// now is the last offset of the constant-rate schedule, before warp.
	now time.Duration
}

// New returns a schedule of rate arrivals per second. The first arrival is at
// offset zero so a run starts working immediately.
func New(p Process, rate float64, seed uint64) (*Schedule, error) {
	return NewWarped(p, rate, seed, nil)
}

// NewWarped is New with the rate multiplied by w's profile at each instant
// of the run (nil: constant). Once the profile's multiplier drops to 0 for
// good, Next returns mooncake.Never.
func NewWarped(p Process, rate float64, seed uint64, w *mooncake.Warper) (*Schedule, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("arrival rate must be > 0, got %g", rate)
	}
	switch p {
	case Poisson, Constant:
	default:
		return nil, fmt.Errorf("unknown arrival process %q (want poisson or constant)", p)
	}
	return &Schedule{
		process: p,
		rate:    rate,
		rng:     rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		warp:    w,
		now:     -1,
	}, nil
}

// Next returns the offset of the next arrival.
func (s *Schedule) Next() time.Duration {
	if s.now < 0 {
		s.now = 0
		return 0
	}
	s.now += s.Gap()
	if s.warp != nil {
		return s.warp.Offset(s.now)
	}
	return s.now
}

// Gap draws one inter-arrival gap of the constant-rate schedule without
// advancing the schedule's offset.
func (s *Schedule) Gap() time.Duration {
	mean := float64(time.Second) / s.rate
	if s.process == Constant {
		return time.Duration(mean)
	}
	return time.Duration(s.rng.ExpFloat64() * mean)
}
