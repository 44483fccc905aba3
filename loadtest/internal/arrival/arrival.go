// Package arrival generates open-loop request arrival schedules.
//
// A schedule is a pure, seeded sequence of offsets from the start of a run;
// the runner sleeps until each offset. Keeping the schedule free of clocks
// lets tests check the generated gaps statistically (mean, coefficient of
// variation) without ever measuring wall time.
package arrival

import (
	"fmt"
	"math/rand/v2"
	"time"
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
	now     time.Duration
}

// New returns a schedule of rate arrivals per second. The first arrival is at
// offset zero so a run starts working immediately.
func New(p Process, rate float64, seed uint64) (*Schedule, error) {
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
	return s.now
}

// Gap draws one inter-arrival gap without advancing the schedule's offset.
func (s *Schedule) Gap() time.Duration {
	mean := float64(time.Second) / s.rate
	if s.process == Constant {
		return time.Duration(mean)
	}
	return time.Duration(s.rng.ExpFloat64() * mean)
}
