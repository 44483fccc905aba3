package policy

import "fmt"

// target is what one pool should have, before stabilization.
type target struct {
	// up is the count to scale up to now (MaxStepUp permitting); down is
	// the count a scale-down may go to, at least up: the count that would
	// still serve the load with DownMargin to spare.
	up, down int
	// model is the throughput model's count (the cap when infeasible).
	model      int
	infeasible bool
	// rule is RuleUp while the model set up, else the override or bound
	// that did; qual names it in the Reason (", capped by max 8") and why
	// explains the count.
	rule      Rule
	qual, why string
	corr      float64
}

// modelTarget turns the model's needs at the planned load (n) and at the
// load plus DownMargin (nm) into a target; rate says which load it was.
func modelTarget(n, nm need, lim Limits, rate string, corr float64) target {
	if n.infeasible {
		return target{up: lim.Max, down: lim.Max, model: lim.Max, infeasible: true, rule: RuleInfeasible,
			qual: ", infeasible", why: fmt.Sprintf("%s; planning for the cap %d", n.why, lim.Max), corr: corr}
	}
	return target{up: n.replicas, down: max(n.replicas, nm.replicas), model: n.replicas, rule: RuleUp,
		why: fmt.Sprintf("%s needs %d %s", rate, n.replicas, n.why), corr: corr}
}

// noDataTarget holds a pool at base while load arrives whose lengths no
// finished request has shown yet: any count would be a guess, and the
// reactive rule still covers a backlog.
func noDataTarget(base int, corr float64) target {
	return target{up: base, down: base, model: base, rule: RuleNoData, why: "no request lengths observed yet", corr: corr}
}

// react applies the reactive rule: when the pool's observed p90 is over
// its target with a backlog (why says which), the pool gets at least one
// replica more than it serves now, whatever the model says: the profile
// did not foresee this load.
func (t *target) react(current int, why string) {
	if why == "" || current+1 <= t.up {
		return
	}
	t.why = fmt.Sprintf("%s (model: %d)", why, t.model)
	t.up, t.down = current+1, max(t.down, current+1)
	t.rule, t.qual = RuleReactive, ", reactive"
}

// clamp bounds the target by the pool's limits.
func (t *target) clamp(lim Limits) {
	if t.up > lim.Max {
		t.up = lim.Max
		if t.rule != RuleInfeasible {
			t.rule, t.qual = RuleMax, fmt.Sprintf(", capped by max %d", lim.Max)
		}
	}
	if t.up < lim.Min {
		t.up = lim.Min
		t.rule, t.qual = RuleMin, fmt.Sprintf(", floor at min %d", lim.Min)
	}
	t.down = min(max(t.down, t.up), lim.Max)
}

// capBudget lowers the target to the pool's budget share.
func (t *target) capBudget(share, budget int) {
	if share >= t.up {
		return
	}
	t.up, t.down = share, share
	t.rule, t.qual = RuleBudget, fmt.Sprintf(", capped by budget %d", budget)
}
