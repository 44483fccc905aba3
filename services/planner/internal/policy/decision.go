package policy

// Decision is one Step's outcome for a model.
type Decision struct {
	Prefill, Decode PoolDecision
	// Rate is the request rate the step planned for: the larger of
	// PredictedRate and the rate observed in the interval.
	Rate, PredictedRate float64
	// ISL and OSL are the mean lengths it planned for.
	ISL, OSL float64
	// TTFTCorrection and ITLCorrection are the online corrections in use.
	TTFTCorrection, ITLCorrection float64
}

// PoolDecision is one pool's outcome.
type PoolDecision struct {
	// Current is the replicas serving now (the observation's).
	Current int
	// Model is what the throughput model asks for, before overrides, caps
	// and stabilization; the pool's Max when Infeasible.
	Model int
	// Desired is the replica count the actuator should converge to.
	Desired int
	// Rule is what decided Desired, stable for metric labels; Reason says
	// it in a sentence.
	Rule   Rule
	Reason string
	// Infeasible: no replica count meets the pool's target; the pool is
	// planned at its cap.
	Infeasible bool
	// Correction is the correction applied to the pool's own latency
	// (TTFT for prefill, ITL for decode).
	Correction float64
}

// Rule names the rule that decided a pool's Desired count.
type Rule string

// Rules.
const (
	// RuleUp: the model needs more replicas than desired.
	RuleUp Rule = "up"
	// RuleDown: a lower desire persisted DownStable intervals.
	RuleDown Rule = "down"
	// RuleHold: the model's count is the desired one (or within the down
	// margin of it).
	RuleHold Rule = "hold"
	// RuleStabilizing: a lower desire has not persisted long enough yet.
	RuleStabilizing Rule = "stabilizing"
	// RuleCooldown: a change is wanted but a cooldown forbids it.
	RuleCooldown Rule = "cooldown"
	// RuleReactive: an observed p90 over target with a backlog raised the
	// count above the model's.
	RuleReactive Rule = "reactive"
	// RuleInfeasible: no count meets the target; planned at the cap.
	RuleInfeasible Rule = "infeasible"
	// RuleMax, RuleMin and RuleBudget: the pool's limits or the budget
	// shared by both pools bound the count.
	RuleMax    Rule = "max"
	RuleMin    Rule = "min"
	RuleBudget Rule = "budget"
	// RuleNoData: load arrives but no request has finished yet, so its
	// lengths are unknown; the count holds.
	RuleNoData Rule = "no-data"
	// RuleOff: the pool is not planned (prefill in aggregated mode).
	RuleOff Rule = "off"
)
