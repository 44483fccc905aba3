// Package actuate applies the planner's replica counts to whatever runs
// the workers: the local supervisor (make run's, the embedded default) or
// Nomad. One small interface, so the planner's loop neither knows nor
// cares which; each actuator maps a pool (model and role) to its own
// notion of one (a supervisor pool, a Nomad job's task group).
//
// An actuator that cannot apply a change now (Nomad during a deployment)
// returns an error wrapping ErrBlocked; the planner keeps its intent and
// asks again at the next interval, so a scaling decision is delayed,
// never lost.
package actuate

import (
	"context"
	"errors"
)

// ErrBlocked is a change the actuator cannot apply now but may later.
var ErrBlocked = errors.New("actuate: blocked for now")

// Pool is one model's pool of one role ("prefill" or "decode").
type Pool struct{ Model, Role string }

func (p Pool) String() string { return p.Model + "/" + p.Role }

// Actuator scales pools.
type Actuator interface {
	// Replicas is how many instances of p the actuator runs, or is
	// starting, not counting those draining.
	Replicas(ctx context.Context, p Pool) (int, error)
	// Scale asks for n instances of p. For a scale-down, victims are the
	// discovery ids of p's instances, the preferred one to stop first
	// (the least loaded); an actuator that cannot choose (Nomad stops the
	// highest allocation index) stops its own choice, which drains the
	// same way (SIGTERM).
	Scale(ctx context.Context, p Pool, n int, victims []string) error
}
