package policy

import (
	"fmt"
	"time"
)

// pool is one pool's stabilization state.
type pool struct {
	started bool
	desired int // the last Step's Desired
	upped   bool
	lastUp  time.Time
	// window holds the latest Steps' down targets, oldest first, at most
	// DownStable of them.
	window []int
}

// base is what a Step changes: the last Desired, so a replica still
// starting is not asked for twice; on the first Step, what serves.
func (s *pool) base(current int) int {
	if s.started {
		return s.desired
	}
	return current
}

// outcome is a pool's stabilized count, before the budget guard.
type outcome struct {
	base, desired int
	// held is RuleCooldown or RuleStabilizing when a wanted change waits;
	// note explains a hold or a scale-down.
	held Rule
	note string
	// cut: the budget guard lowered desired; overMax: the pool served
	// more than its Max and was cut to it.
	cut, overMax bool
}

// stabilize moves a pool toward its target: up at once by MaxStepUp at
// most, outside UpCooldown after its last scale-up; down by one, only when
// every down target of the last DownStable Steps was below the count and
// outside DownCooldown after its last scale-up. A count above the pool's
// Max (replicas found serving on the first Step) is cut to Max at once.
func (c Config) stabilize(s *pool, t target, base, maxReplicas int, now time.Time) outcome {
	o := outcome{base: base, desired: base}
	s.window = append(s.window, t.down)
	if len(s.window) > c.DownStable {
		s.window = s.window[1:]
	}
	if base > maxReplicas {
		o.desired, o.overMax = maxReplicas, true
		return o
	}
	if t.up > base {
		if left := c.UpCooldown - now.Sub(s.lastUp); s.upped && left > 0 {
			o.held, o.note = RuleCooldown, fmt.Sprintf("up to %d waits out the %v up cooldown (%v left)", t.up, c.UpCooldown, left)
			return o
		}
		o.desired = min(t.up, base+c.MaxStepUp)
		return o
	}
	run, want := lowerRun(s.window, base)
	left := c.DownCooldown - now.Sub(s.lastUp)
	switch {
	case run == 0:
	case run < c.DownStable:
		o.held, o.note = RuleStabilizing, fmt.Sprintf("lower desire %d for %d/%d intervals", want, run, c.DownStable)
	case s.upped && left > 0:
		o.held, o.note = RuleCooldown, fmt.Sprintf("down to %d waits out the %v cooldown after a scale-up (%v left)", want, c.DownCooldown, left)
	default:
		o.desired = base - 1
		o.note = fmt.Sprintf("%d wanted for %d intervals", want, run)
	}
	return o
}

// lowerRun counts the latest window entries below base and returns the
// largest of them: the count a scale-down heads for.
func lowerRun(window []int, base int) (run, want int) {
	for i := len(window) - 1; i >= 0 && window[i] < base; i-- {
		run, want = run+1, max(want, window[i])
	}
	return run, want
}

// commit records a pool's Desired.
func (s *pool) commit(o outcome, now time.Time) {
	if o.desired > o.base {
		s.upped, s.lastUp = true, now
	}
	s.started, s.desired = true, o.desired
}

// guardBudget keeps both pools' Desired within the budget after
// stabilization, which can otherwise exceed it: a pool whose scale-down
// still waits holds replicas the budget split already gave the other.
// First it takes back this Step's scale-ups, prefill's before decode's (as
// splitBudget favours decode), but never below a pool's Min. A count
// already over the budget before the Step (only replicas found serving on
// the first Step can be) is then cut at once to the pool's share: the
// budget is a cost ceiling, not a target to approach gently. Shares are at
// least the Mins and sum to at most the budget, so this always fits.
func guardBudget(budget int, pools [2]*outcome, shares, mins [2]int) {
	over := pools[0].desired + pools[1].desired - budget
	for i, o := range pools {
		if cut := min(over, max(o.desired-max(o.base, mins[i]), 0)); cut > 0 {
			o.desired, o.cut, over = o.desired-cut, true, over-cut
		}
	}
	for i, o := range pools {
		if cut := min(over, max(o.desired-shares[i], 0)); cut > 0 {
			o.desired, o.cut, over = o.desired-cut, true, over-cut
		}
	}
}
