package policy

import (
	"fmt"
	"time"
)

// Config is one model's planning targets, limits and stabilization.
// Start from DefaultConfig: a zero field is a value, not "the default"
// (a Min of 0 means the pool may scale to zero).
type Config struct {
	// TTFT is the p90 time to first token the model plans for: the model
	// predicts a pool's p90 (a pooled M/M/n queue of prefills), the online
	// correction learns how far the observed p90 sits from that, and the
	// reactive rule compares the observed p90 with TTFT. Set it below the
	// SLA: the requests past the p90 need the headroom.
	TTFT time.Duration
	// ITL is the inter-token latency target, read the same way.
	ITL time.Duration
	// Interval is the time between two Steps; the caller's ticker uses it,
	// and DownStable counts in it.
	Interval time.Duration
	// Prefill and Decode bound each pool. In aggregated mode Prefill is
	// not used.
	Prefill, Decode Limits
	// Budget caps the replicas of both pools together (the cost ceiling);
	// 0 means no cap beyond each pool's Max.
	Budget int
	// MaxStepUp is the most replicas one Step adds to a pool. A scale-down
	// removes one replica per Step at most, always.
	MaxStepUp int
	// DownStable is how many consecutive Steps a lower desire must persist
	// before a pool scales down.
	DownStable int
	// DownCooldown is how long after a pool's scale-up it may not scale
	// down; UpCooldown how long after it may not scale up again.
	DownCooldown, UpCooldown time.Duration
	// DownMargin is the headroom a scale-down must leave: a pool drops a
	// replica only if the rest would still serve the planned load times
	// 1+DownMargin. It is the hysteresis between the count that triggers
	// a scale-up and the one that allows a scale-down, so a load that sits
	// on the boundary between two counts does not flap between them.
	DownMargin float64
	// Disaggregated plans a prefill pool and a decode pool; false plans an
	// aggregated decode pool that also prefills.
	Disaggregated bool
	// Slack is how far over its target an observed p90 may be before the
	// reactive rule adds a replica: at p90 > target × (1+Slack).
	Slack float64
	// MinSamples is the fewest requests finished in an interval whose
	// latencies update the correction; fewer give a p90 too noisy to
	// learn from.
	MinSamples int
	// RateSpread is how many standard errors of the rate's forecast
	// (an EWMA of its squared error, weighted by CorrectionWeight) the
	// planned rate adds to the forecast: headroom for bursts in
	// proportion to how bursty the arrivals have been. 0 plans the
	// forecast alone.
	RateSpread float64
	// CorrectionWeight is the EWMA weight of a new observed/expected
	// ratio in the correction, in (0, 1].
	CorrectionWeight float64
}

// Limits bound one pool's replicas.
type Limits struct{ Min, Max int }

// Default configuration values. Each is a starting point for a model whose
// replicas start in tens of seconds (the local supervisor, a Nomad job
// with the weights on local disk).
const (
	// DefaultTTFT and DefaultITL are interactive-chat targets.
	DefaultTTFT = 500 * time.Millisecond
	DefaultITL  = 50 * time.Millisecond
	// DefaultInterval is short enough to catch a load step before a
	// minute's queue builds and long enough for an interval's p90 to rest
	// on tens of requests at modest rates.
	DefaultInterval = 10 * time.Second
	// DefaultMin keeps one warm replica per pool: a cold start costs a
	// TTFT far above any target. DefaultMax is a single node's worth.
	DefaultMin = 1
	DefaultMax = 8
	// DefaultMaxStepUp adds two replicas an interval: a wrong prediction
	// costs two replicas for one cooldown, while a genuine step from one
	// replica reaches eight within four intervals.
	DefaultMaxStepUp = 2
	// DefaultDownStable waits three intervals (30 s) of lower desire, so
	// a lull between bursts is not taken for a fall in load.
	DefaultDownStable = 3
	// DefaultDownCooldown keeps a replica added in a burst for a minute,
	// about its start-up time: removing it sooner wastes the start.
	DefaultDownCooldown = 60 * time.Second
	// DefaultUpCooldown is 0: MaxStepUp already paces scale-ups, and a
	// replica still starting is counted as desired, not asked for again.
	DefaultUpCooldown = 0
	// DefaultDownMargin (10%) is wider than the interval-to-interval
	// noise of a steady rate at tens of requests per interval.
	DefaultDownMargin = 0.1
	// DefaultSlack lets the observed p90 exceed its target by 10% before
	// the reactive rule overrides the model.
	DefaultSlack = 0.1
	// DefaultMinSamples: a p90 of ten requests (the second-slowest) is
	// coarse, but the correction averages it over many intervals.
	DefaultMinSamples = 10
	// DefaultCorrectionWeight settles a persistent error to within 5% in
	// about nine intervals, while one outlying interval moves the
	// correction by under a third of its deviation.
	DefaultCorrectionWeight = 0.3
	// DefaultRateSpread is 0, the forecast alone: on the bursty
	// conversation trace one standard error of headroom cut plansim's
	// violations by a third for 7% more replica-seconds, a trade that is
	// the operator's to make (docs/benchmarks/2026-12-02-planner.md).
	DefaultRateSpread = 0
)

// Correction bounds: a profile more than 4× off is a wrong profile, which
// the correction should not hide, and one 2× pessimistic would scale a
// pool down on the correction's word alone.
const (
	MinCorrection = 0.5
	MaxCorrection = 4
)

// DefaultConfig is the documented defaults, disaggregated.
func DefaultConfig() Config {
	return Config{
		TTFT:             DefaultTTFT,
		ITL:              DefaultITL,
		Interval:         DefaultInterval,
		Prefill:          Limits{DefaultMin, DefaultMax},
		Decode:           Limits{DefaultMin, DefaultMax},
		MaxStepUp:        DefaultMaxStepUp,
		DownStable:       DefaultDownStable,
		DownCooldown:     DefaultDownCooldown,
		UpCooldown:       DefaultUpCooldown,
		DownMargin:       DefaultDownMargin,
		Disaggregated:    true,
		Slack:            DefaultSlack,
		MinSamples:       DefaultMinSamples,
		CorrectionWeight: DefaultCorrectionWeight,
		RateSpread:       DefaultRateSpread,
	}
}

// Validate reports the first invalid field, by name.
func (c Config) Validate() error {
	var errs []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.TTFT <= 0, "TTFT %v is not positive", c.TTFT)
	check(c.ITL <= 0, "ITL %v is not positive", c.ITL)
	check(c.Interval <= 0, "Interval %v is not positive", c.Interval)
	if c.Disaggregated {
		checkLimits(check, "Prefill", c.Prefill)
	}
	checkLimits(check, "Decode", c.Decode)
	mins := c.Decode.Min
	if c.Disaggregated {
		mins += c.Prefill.Min
	}
	check(c.Budget < 0, "Budget %d is negative", c.Budget)
	check(c.Budget > 0 && c.Budget < mins, "Budget %d is below the pools' Min replicas, %d together", c.Budget, mins)
	check(c.MaxStepUp < 1, "MaxStepUp %d is below 1", c.MaxStepUp)
	check(c.DownStable < 1, "DownStable %d is below 1", c.DownStable)
	check(c.DownCooldown < 0, "DownCooldown %v is negative", c.DownCooldown)
	check(c.UpCooldown < 0, "UpCooldown %v is negative", c.UpCooldown)
	check(!(c.DownMargin >= 0 && c.DownMargin <= 1), "DownMargin %v is outside [0, 1]", c.DownMargin)
	check(!(c.Slack >= 0 && c.Slack <= 10), "Slack %v is outside [0, 10]", c.Slack)
	check(c.MinSamples < 1, "MinSamples %d is below 1", c.MinSamples)
	check(!(c.CorrectionWeight > 0 && c.CorrectionWeight <= 1), "CorrectionWeight %v is outside (0, 1]", c.CorrectionWeight)
	check(!(c.RateSpread >= 0 && c.RateSpread <= 10), "RateSpread %v is outside [0, 10]", c.RateSpread)
	if len(errs) > 0 {
		return fmt.Errorf("policy config: %w", errs[0])
	}
	return nil
}

func checkLimits(check func(bool, string, ...any), pool string, l Limits) {
	check(l.Min < 0, "%s.Min %d is negative", pool, l.Min)
	check(l.Max < 1, "%s.Max %d is below 1", pool, l.Max)
	check(l.Max >= 1 && l.Max < l.Min, "%s.Max %d is below %s.Min %d", pool, l.Max, pool, l.Min)
}

// budget is the cap on both pools together.
func (c Config) budget() int {
	switch {
	case c.Budget > 0:
		return c.Budget
	case !c.Disaggregated:
		return c.Decode.Max
	}
	return c.Prefill.Max + c.Decode.Max
}
