// Package rollout runs canary rollouts: per role, the version under test
// and the share of traffic it takes (published to frontends and routers,
// which split requests by it: libs/mesh/canary), and a judge that
// compares the canary's errors and latency with its baseline's, steps the
// share up while they hold, and promotes or aborts.
//
// The judge reads what users saw: the frontends' metrics, labelled with
// the router and worker versions that served (observe.Side). A verdict
// needs a minimum of requests on both sides, accumulated over as many
// planner intervals as it takes, so a quiet fleet waits instead of
// judging noise; a canary is compared with its baseline over the same
// interval, under the same traffic mix, never with a fixed target.
//
// A rollout's end is an action too: Ender promotes or fails the
// deployment (Nomad) or removes the canaries (the local supervisor).
// An end the actuator refused is retried every interval, never dropped.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/planner/internal/observe"
)

// State is where a rollout stands.
type State string

// States.
const (
	// Judging: the judge steps the weight and will promote or abort.
	Judging State = "judging"
	// Holding: the weight stays where it was set.
	Holding State = "holding"
	// Promoted: the canary's version is the baseline; it takes all
	// traffic while the old instances are replaced.
	Promoted State = "promoted"
	// Aborted: the canary takes no traffic.
	Aborted State = "aborted"
)

// Stats summarize one side of a comparison.
type Stats struct {
	Requests, Errors float64
	TTFTP50, TTFTP99 float64
	ITLP50, ITLP99   float64
}

func stats(s observe.Side) Stats {
	return Stats{Requests: s.Generations + s.Errors, Errors: s.Errors,
		TTFTP50: s.TTFT.Quantile(0.5), TTFTP99: s.TTFT.Quantile(0.99), ITLP50: s.ITL.Quantile(0.5), ITLP99: s.ITL.Quantile(0.99)}
}

// ErrorRate is errors over requests, 0 without requests.
func (s Stats) ErrorRate() float64 {
	if s.Requests == 0 {
		return 0
	}
	return s.Errors / s.Requests
}

// Rollout is one role's canary.
type Rollout struct {
	Role, Version string
	Weight        float64
	Judge         bool
	State         State
	Reason        string
	Started       time.Time
	Changed       time.Time
	// Canary and Baseline are what the last verdict compared.
	Canary, Baseline Stats

	canary, baseline observe.Side // accumulated towards the next verdict
	ending           *bool        // an end the actuator has yet to apply: promote?
}

// Active reports whether the rollout still splits traffic under test.
func (r *Rollout) Active() bool { return r.State == Judging || r.State == Holding }

// Criteria are the judge's thresholds.
type Criteria struct {
	// MinRequests is how many requests each side needs before a verdict.
	MinRequests float64
	// MaxErrorRate is how far the canary's error rate may exceed its
	// baseline's (absolute: 0.02 is two points).
	MaxErrorRate float64
	// MaxLatencyRatio bounds canary over baseline TTFT and ITL medians,
	// MaxTailRatio their 99th percentiles. A difference under
	// LatencyFloor never fails (bucket resolution, not a regression).
	MaxLatencyRatio float64
	MaxTailRatio    float64
	LatencyFloor    time.Duration
	// Steps are the weights the judge raises a rollout through, rising;
	// passing at the last one promotes.
	Steps []float64
}

// DefaultCriteria returns the judge's defaults: a canary may be 50%
// slower at the median and twice at the tail, or fail 2 more requests in
// 100, before it is aborted, judged on at least 30 requests a side at
// 10%, 25% and 50% of the traffic.
func DefaultCriteria() Criteria {
	return Criteria{MinRequests: 30, MaxErrorRate: 0.02, MaxLatencyRatio: 1.5, MaxTailRatio: 2,
		LatencyFloor: 5 * time.Millisecond, Steps: []float64{0.1, 0.25, 0.5}}
}

// Validate checks the thresholds, naming the one out of range.
func (c Criteria) Validate() error {
	switch {
	case math.IsNaN(c.MinRequests) || c.MinRequests < 1 || c.MinRequests > 1e6:
		return fmt.Errorf("rollout: min requests %v: want 1 to 1e6", c.MinRequests)
	case math.IsNaN(c.MaxErrorRate) || c.MaxErrorRate < 0 || c.MaxErrorRate > 1:
		return fmt.Errorf("rollout: max error rate %v: want a share in [0, 1]", c.MaxErrorRate)
	case math.IsNaN(c.MaxLatencyRatio) || c.MaxLatencyRatio < 1 || c.MaxLatencyRatio > 100:
		return fmt.Errorf("rollout: max latency ratio %v: want 1 to 100", c.MaxLatencyRatio)
	case math.IsNaN(c.MaxTailRatio) || c.MaxTailRatio < 1 || c.MaxTailRatio > 100:
		return fmt.Errorf("rollout: max tail ratio %v: want 1 to 100", c.MaxTailRatio)
	case c.LatencyFloor < 0 || c.LatencyFloor > time.Minute:
		return fmt.Errorf("rollout: latency floor %v: want 0 to 1m", c.LatencyFloor)
	case len(c.Steps) == 0:
		return errors.New("rollout: no weight steps")
	}
	prev := 0.0
	for _, s := range c.Steps {
		if math.IsNaN(s) || s <= prev || s >= 1 {
			return fmt.Errorf("rollout: weight steps %v: want rising weights in (0, 1)", c.Steps)
		}
		prev = s
	}
	return nil
}

// Ender applies a rollout's end to the deployment: promote makes the
// canary's version the baseline, abort removes the canaries.
type Ender interface {
	EndRollout(ctx context.Context, role, version string, promote bool) error
}

// label is the frontend metric label that names a role's version; roles
// without one can be held at a weight but not judged.
var label = map[string]string{
	discovery.RoleRouter: observe.LabelRouterVersion,
	discovery.RoleDecode: observe.LabelWorkerVersion,
}

// Roles a rollout can split: those a frontend or router chooses among.
var Roles = []string{discovery.RoleRouter, discovery.RoleDecode, discovery.RolePrefill}

// ErrInvalid marks a request the controller refuses as malformed.
var ErrInvalid = errors.New("rollout: invalid")

// ErrNoRollout is returned by End for a role without an active rollout.
var ErrNoRollout = errors.New("rollout: no active rollout of the role")

// Controller keeps the rollouts and judges them. Safe for concurrent use.
type Controller struct {
	crit  Criteria
	ender Ender // nil: ends only change the weights
	log   *slog.Logger
	now   func() time.Time

	mu       sync.Mutex
	rollouts map[string]*Rollout
}

// New returns a controller with crit (validated), ending rollouts through
// ender (may be nil).
func New(crit Criteria, ender Ender, log *slog.Logger) (*Controller, error) {
	if err := crit.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{crit: crit, ender: ender, log: log, now: time.Now, rollouts: map[string]*Rollout{}}, nil
}

// Set starts a rollout of role's version at weight, or changes the
// weight and judging of the one in progress. With judge, the judge takes
// the weight from there through the steps above it.
func (c *Controller) Set(role, version string, weight float64, judge bool) (Rollout, error) {
	if !slices.Contains(Roles, role) {
		return Rollout{}, fmt.Errorf("%w: role %q: want one of %v", ErrInvalid, role, Roles)
	}
	if err := (canary.Rollout{Version: version, Weight: weight}).Validate(role); err != nil {
		return Rollout{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, ok := label[role]; judge && !ok {
		return Rollout{}, fmt.Errorf("%w: a %s canary cannot be judged (the frontends' metrics name router and decode versions only); set its weight without the judge", ErrInvalid, role)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	r := c.rollouts[role]
	if r == nil || !r.Active() || r.Version != version {
		r = &Rollout{Role: role, Version: version, Started: now}
		c.rollouts[role] = r
	}
	r.Weight, r.Judge, r.Changed = weight, judge, now
	r.canary, r.baseline = observe.Side{}, observe.Side{}
	if judge {
		r.State, r.Reason = Judging, fmt.Sprintf("judging at weight %v", weight)
	} else {
		r.State, r.Reason = Holding, fmt.Sprintf("held at weight %v by an operator", weight)
	}
	c.log.Info("rollout set", "role", role, "version", version, "weight", weight, "judge", judge)
	return *r, nil
}

// End promotes or aborts role's active rollout.
func (c *Controller) End(ctx context.Context, role string, promote bool, reason string) (Rollout, error) {
	c.mu.Lock()
	r := c.rollouts[role]
	if r == nil || !r.Active() {
		c.mu.Unlock()
		return Rollout{}, fmt.Errorf("%w: %q", ErrNoRollout, role)
	}
	c.finish(r, promote, reason)
	c.mu.Unlock()
	c.apply(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	return *r, nil
}

// finish marks r ended and its end pending; c.mu held.
func (c *Controller) finish(r *Rollout, promote bool, reason string) {
	r.State, r.Weight, r.Reason, r.Changed = Aborted, 0, "aborted: "+reason, c.now()
	if promote {
		r.State, r.Weight, r.Reason = Promoted, 1, "promoted: "+reason
	}
	r.ending = &promote
	c.log.Info("rollout ended", "role", r.Role, "version", r.Version, "promoted", promote, "reason", reason)
}

// apply hands the pending ends to the ender; a refused one stays pending.
func (c *Controller) apply(ctx context.Context) {
	c.mu.Lock()
	var todo []Rollout
	for _, r := range c.rollouts {
		if r.ending != nil {
			todo = append(todo, *r)
		}
	}
	c.mu.Unlock()
	for _, r := range todo {
		var err error
		if c.ender != nil {
			err = c.ender.EndRollout(ctx, r.Role, r.Version, *r.ending)
		}
		c.mu.Lock()
		cur := c.rollouts[r.Role]
		if cur != nil && cur.Version == r.Version && cur.ending != nil {
			if err != nil {
				c.log.Warn("rollout end not applied; retrying", "role", r.Role, "version", r.Version, "err", err)
				cur.Reason = fmt.Sprintf("%s (not applied yet: %v)", r.Reason, err)
			} else {
				cur.ending = nil
			}
		}
		c.mu.Unlock()
	}
}

// List returns the rollouts, by role.
func (c *Controller) List() []Rollout {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Rollout, 0, len(c.rollouts))
	for _, role := range slices.Sorted(maps.Keys(c.rollouts)) {
		out = append(out, *c.rollouts[role])
	}
	return out
}

// Published is what frontends and routers split by: every rollout's
// version and weight (a promoted one at 1, an aborted one at 0, until
// the next rollout of its role replaces it).
func (c *Controller) Published() canary.Rollouts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := canary.Rollouts{}
	for role, r := range c.rollouts {
		out[role] = canary.Rollout{Version: r.Version, Weight: r.Weight}
	}
	return out
}

// Observe feeds one interval of what each version served to the judge,
// which may step, promote or abort rollouts; then pending ends are
// applied.
func (c *Controller) Observe(ctx context.Context, versions map[observe.VersionKey]observe.Side) {
	c.mu.Lock()
	for _, r := range c.rollouts {
		if r.State == Judging {
			c.judge(r, versions)
		}
	}
	c.mu.Unlock()
	c.apply(ctx)
}

// judge adds the interval to r's sides and decides once both have enough
// requests; c.mu held.
func (c *Controller) judge(r *Rollout, versions map[observe.VersionKey]observe.Side) {
	l := label[r.Role]
	for k, s := range versions {
		if k.Label != l {
			continue
		}
		side := &r.baseline
		if k.Version == r.Version {
			side = &r.canary
		}
		side.Generations += s.Generations
		side.Errors += s.Errors
		side.TTFT.Add(s.TTFT)
		side.ITL.Add(s.ITL)
	}
	can, base := stats(r.canary), stats(r.baseline)
	if can.Requests < c.crit.MinRequests || base.Requests < c.crit.MinRequests {
		r.Reason = fmt.Sprintf("waiting for requests at weight %v: canary %.0f, baseline %.0f of %.0f each", r.Weight, can.Requests, base.Requests, c.crit.MinRequests)
		return
	}
	r.Canary, r.Baseline = can, base
	cs := r.canary
	r.canary, r.baseline = observe.Side{}, observe.Side{}
	if why := c.verdict(can, base, cs); why != "" {
		c.finish(r, false, why)
		return
	}
	next := -1.0
	for _, s := range c.crit.Steps {
		if s > r.Weight {
			next = s
			break
		}
	}
	if next < 0 {
		c.finish(r, true, fmt.Sprintf("held its errors and latency at weight %v", r.Weight))
		return
	}
	r.Weight, r.Changed = next, c.now()
	r.Reason = fmt.Sprintf("passed, stepped to weight %v", next)
	c.log.Info("rollout stepped", "role", r.Role, "version", r.Version, "weight", next)
}

// zFail is how many standard deviations past what chance gives a
// difference must be to fail a canary: a one-sided test at about 0.1%
// for each check, so that an identical canary, judged on a few checks at
// three steps, is aborted in well under one rollout in twenty.
const zFail = 3

// minErrors is the fewest failed canary requests that can fail it: one
// error in thirty requests is three points, but it is also one error.
const minErrors = 3

// verdict is why the canary fails against base, or "" when it passes;
// cs holds the canary's latency samples. A check fails only when the
// difference is both large (past its threshold) and unlikely to be
// chance at the samples each side has, so one slow request, or one
// error, in thirty does not abort a canary.
func (c *Controller) verdict(can, base Stats, cs observe.Side) string {
	if d := can.ErrorRate() - base.ErrorRate(); d > c.crit.MaxErrorRate && can.Errors >= minErrors && errorZ(can, base) > zFail {
		return fmt.Sprintf("error rate %.1f%% against the baseline's %.1f%%", 100*can.ErrorRate(), 100*base.ErrorRate())
	}
	floor := c.crit.LatencyFloor.Seconds()
	for _, m := range []struct {
		name      string
		can, base float64
		max       float64
		q         float64
		h         observe.Histogram
	}{
		{"TTFT p50", can.TTFTP50, base.TTFTP50, c.crit.MaxLatencyRatio, 0.5, cs.TTFT},
		{"ITL p50", can.ITLP50, base.ITLP50, c.crit.MaxLatencyRatio, 0.5, cs.ITL},
		{"TTFT p99", can.TTFTP99, base.TTFTP99, c.crit.MaxTailRatio, 0.99, cs.TTFT},
		{"ITL p99", can.ITLP99, base.ITLP99, c.crit.MaxTailRatio, 0.99, cs.ITL},
	} {
		if m.can-m.base > floor && m.can > m.max*m.base && beyond(m.h, m.base, m.q) {
			return fmt.Sprintf("%s %s against the baseline's %s", m.name, ms(m.can), ms(m.base))
		}
	}
	return ""
}

// beyond reports whether more of h's samples lie above the baseline's
// q-quantile x than chance would put there if both sides had one
// distribution (a share 1-q of them, binomially spread).
func beyond(h observe.Histogram, x, q float64) bool {
	n := h.Total()
	if n == 0 {
		return false
	}
	above := h.FractionAbove(x) * n
	return above > n*(1-q)+zFail*math.Sqrt(n*q*(1-q))
}

// errorZ is the two-proportion z statistic of the canary's error rate
// over the baseline's.
func errorZ(can, base Stats) float64 {
	p := (can.Errors + base.Errors) / (can.Requests + base.Requests)
	se := math.Sqrt(p * (1 - p) * (1/can.Requests + 1/base.Requests))
	if se == 0 {
		return 0
	}
	return (can.ErrorRate() - base.ErrorRate()) / se
}

func ms(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(10 * time.Microsecond).String()
}
