package app

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"switchyard.dev/services/planner/internal/actuate"
	"switchyard.dev/services/planner/internal/policy"
	"switchyard.dev/services/planner/internal/predict"
	"switchyard.dev/services/planner/internal/rollout"
)

// flags are the planner's own flags.
type flags struct {
	profiles      string
	policy        policy.Config
	predictor     string
	actuator      string
	supervisorURL string
	leaderLock    string
	sampleTimeout time.Duration
	nomad         actuate.NomadConfig
	rollout       rollout.Criteria
}

func (f *flags) register(fs *flag.FlagSet) {
	d := policy.DefaultConfig()
	f.policy = d
	fs.StringVar(&f.profiles, "profile", "", "profile files (planner profile's output), comma-separated, one a model; a model without one is observed only")
	fs.DurationVar(&f.policy.TTFT, "ttft-target", d.TTFT, "the p90 time to first token the planner keeps each model at")
	fs.DurationVar(&f.policy.ITL, "itl-target", d.ITL, "the p90 inter-token latency the planner keeps each model at")
	fs.DurationVar(&f.policy.Interval, "interval", d.Interval, "time between two planning steps")
	fs.IntVar(&f.policy.Prefill.Min, "min-prefill", d.Prefill.Min, "fewest prefill replicas a model keeps (disaggregated)")
	fs.IntVar(&f.policy.Prefill.Max, "max-prefill", d.Prefill.Max, "most prefill replicas a model gets")
	fs.IntVar(&f.policy.Decode.Min, "min-decode", d.Decode.Min, "fewest decode replicas a model keeps")
	fs.IntVar(&f.policy.Decode.Max, "max-decode", d.Decode.Max, "most decode replicas a model gets")
	fs.IntVar(&f.policy.Budget, "budget", d.Budget, "most replicas of both pools of a model together (0: the pools' maxima)")
	fs.IntVar(&f.policy.MaxStepUp, "max-step-up", d.MaxStepUp, "most replicas a step adds to a pool (a step removes one at most)")
	fs.IntVar(&f.policy.DownStable, "down-stable", d.DownStable, "intervals a lower desire must last before a pool scales down")
	fs.DurationVar(&f.policy.DownCooldown, "down-cooldown", d.DownCooldown, "no scale-down this long after a pool's scale-up")
	fs.Float64Var(&f.policy.DownMargin, "down-margin", d.DownMargin, "headroom a scale-down must leave: the rest must serve this much more than the planned load")
	fs.Float64Var(&f.policy.Slack, "slack", d.Slack, "how far over its target an observed p90 may be before the reactive rule adds a replica")
	fs.Float64Var(&f.policy.RateSpread, "rate-spread", d.RateSpread, "planner: standard errors of the rate forecast added as headroom for bursts")
	fs.StringVar(&f.predictor, "predictor", predict.DefaultSpec, "load predictor: constant, holt-winters[:alpha=A,beta=B,gamma=G,season=N] or kalman[:level=L,trend=T]")
	fs.StringVar(&f.actuator, "actuator", "none", "what scales the pools: none (plan and report only), supervisor (make run's) or nomad")
	fs.StringVar(&f.supervisorURL, "supervisor-url", "http://127.0.0.1:9600", "the local supervisor's API (with -actuator supervisor)")
	fs.StringVar(&f.leaderLock, "leader-lock", "", "the leader lock: a file path (default <discovery-dir>/planner.lock), or a Consul KV key with -discovery consul (default switchyard/planner/leader)")
	f.nomad.RegisterFlags(fs)
	fs.DurationVar(&f.sampleTimeout, "sample-timeout", 2*time.Second, "deadline of each scrape of a frontend and each worker's GetLoad")
	rc := rollout.DefaultCriteria()
	f.rollout = rc
	fs.Float64Var(&f.rollout.MinRequests, "rollout-min-requests", rc.MinRequests, "rollout judge: requests each side (canary, baseline) needs before a verdict")
	fs.Float64Var(&f.rollout.MaxErrorRate, "rollout-max-error-rate", rc.MaxErrorRate, "rollout judge: how far a canary's error rate may exceed its baseline's, as a share (0.02: two points)")
	fs.Float64Var(&f.rollout.MaxLatencyRatio, "rollout-max-latency-ratio", rc.MaxLatencyRatio, "rollout judge: most a canary's TTFT and ITL medians may be, over its baseline's")
	fs.Float64Var(&f.rollout.MaxTailRatio, "rollout-max-tail-ratio", rc.MaxTailRatio, "rollout judge: most a canary's TTFT and ITL 99th percentiles may be, over its baseline's")
	fs.DurationVar(&f.rollout.LatencyFloor, "rollout-latency-floor", rc.LatencyFloor, "rollout judge: a latency difference below this never fails a canary")
	fs.Var(stepsFlag{&f.rollout.Steps}, "rollout-steps", "rollout judge: the rising weights a judged canary goes through before promotion (default "+stepsFlag{&rc.Steps}.String()+")")
}

func (f *flags) validate() error {
	var errs []error
	if err := f.policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	// A model with no worker shows no load (its requests fail before any
	// frontend counts them), so a pool at zero would never come back.
	if f.policy.Decode.Min < 1 {
		errs = append(errs, fmt.Errorf("-min-decode %d: at least 1 (a pool at zero has no load to plan from)", f.policy.Decode.Min))
	}
	if _, err := predict.Parse(f.predictor); err != nil {
		errs = append(errs, fmt.Errorf("-predictor: %w", err))
	}
	switch f.actuator {
	case "none", "supervisor", "nomad":
	default:
		errs = append(errs, fmt.Errorf("-actuator %q: want none, supervisor or nomad", f.actuator))
	}
	if f.actuator == "supervisor" && !strings.HasPrefix(f.supervisorURL, "http") {
		errs = append(errs, fmt.Errorf("-supervisor-url %q: want an http:// URL", f.supervisorURL))
	}
	if err := f.rollout.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("-rollout-*: %w", err))
	}
	if f.sampleTimeout <= 0 {
		errs = append(errs, errors.New("-sample-timeout must be positive"))
	}
	return errors.Join(errs...)
}

func (f *flags) profilePaths() []string {
	var out []string
	for _, p := range strings.Split(f.profiles, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
