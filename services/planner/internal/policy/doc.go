// Package policy is the SLA planner's decision core: given what the last
// interval showed, how many prefill and decode replicas a model should
// have so that TTFT and ITL meet their targets at the least cost. It is
// pure: no I/O, no clock (Step takes the time), no goroutines, so a
// harness can replay any sequence of intervals. Inputs (frontend metrics,
// worker load) and actuators (the local supervisor, Nomad) live elsewhere.
//
// # One Step
//
// A Planner per model runs one Step per interval:
//
//  1. Correct. The observed p90 TTFT and ITL are compared with what the
//     model expected at the interval's observed load and serving replicas;
//     each correction is an EWMA of those ratios in [0.5, 4], updated only
//     from intervals with MinSamples finished requests.
//  2. Forecast. A predict.Predictor forecasts the next interval's rate
//     (holt-winters by default); the planner plans for the larger of the
//     forecast and the rate just observed.
//  3. Model. The profile (package profile) turns the load into a replica
//     count per pool:
//     - prefill: each replica an M/M/1 queue with service time t_p, a lone
//     prefill of the mean prompt; TTFT ≈ c·t_p/(1−ρ) ≤ T gives
//     ρ_max = 1 − c·t_p/T and n = ⌈λ·t_p/ρ_max⌉;
//     - decode: B* = the largest batch whose corrected ITL meets the target
//     and fits the KV cache, at a context of ISL + OSL/2; Little's law
//     gives λ·OSL·c·ITL(B*) sequences at once, n = ⌈that/B*⌉;
//     - aggregated (one pool that does both): the smallest n at which
//     prefill takes ρ_p = λ·t_p/n ≤ ρ_max of each replica's time and the
//     decode batch, slowed by prefill to c·ITL(b)/(1−ρ_p), meets the ITL
//     target.
//     A target no count can meet (c·t_p ≥ T, or batch 1 over the ITL
//     target) is reported Infeasible and the pool is planned at its cap.
//  4. React. When a pool's observed p90 exceeds its target by Slack with a
//     backlog (requests waiting, or a decode KV cache nearly full), the
//     pool gets at least one replica more than it serves, whatever the
//     model says: the profile did not foresee this.
//  5. Bound. Each pool is clamped to [Min, Max]; if the two together exceed
//     the Budget, each keeps its Min and the rest is split in proportion to
//     what each wants above it, the odd replica to decode.
//  6. Stabilize. Up: at once, by MaxStepUp at most, outside UpCooldown.
//     Down: by one per Step, only after the lower desire persisted
//     DownStable Steps, outside DownCooldown after the pool's last
//     scale-up, and only to a count that would still serve the load with
//     DownMargin to spare (the hysteresis that keeps a steady load from
//     flapping between two counts). A last guard keeps the sum within the
//     budget when a held scale-down would otherwise overlap another pool's
//     scale-up.
//
// Each pool's PoolDecision carries the model's count, the desired count, a
// stable Rule for metric labels and a Reason sentence for people.
//
// # Why the correction scales latency, not load
//
// The correction multiplies the latency the model predicts (c·t_p, c·ITL),
// so it enters the utilisation bound as well as the count: with TTFT
// observed at c times the model's, the target is met at ρ = 1 − c·t_p/T,
// which is exactly where the corrected model plans. Multiplying only the
// count (n = c·λ·t_p/(1−t_p/T)) would miss the target whenever c·t_p is a
// large part of T, and would never call a target infeasible that a slow
// lone prefill already misses. The same correction also absorbs the gap
// between the model's mean and the observed p90 that the SLA is checked
// on, which is why the targets are documented as means the model plans
// for.
//
// # Stabilization is relative to the last decision
//
// Steps change the planner's last Desired, not the serving count, so a
// replica still starting is not asked for again; the reactive rule, which
// reads the serving count, adds one only when what serves plus one is more
// than what is already desired.
package policy
