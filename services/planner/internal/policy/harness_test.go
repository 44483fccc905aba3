package policy

import (
	"math"
	"testing"
	"time"

	"switchyard.dev/services/planner/internal/profile"
)

// testProfile is the planner's profile in these tests: prefill 40 ms at
// 512 tokens; decode rows at context 512 and 2048.
func testProfile() *profile.Profile {
	return &profile.Profile{
		Version: profile.Version, Model: "m", BlockSize: 16, KVBlocks: 16384,
		Prefill: []profile.PrefillPoint{{InputTokens: 128, Seconds: 0.012}, {InputTokens: 512, Seconds: 0.040}, {InputTokens: 2048, Seconds: 0.170}},
		Decode: []profile.DecodePoint{
			{Batch: 1, ContextTokens: 512, ITLSeconds: 0.004}, {Batch: 8, ContextTokens: 512, ITLSeconds: 0.005},
			{Batch: 32, ContextTokens: 512, ITLSeconds: 0.008}, {Batch: 64, ContextTokens: 512, ITLSeconds: 0.012},
			{Batch: 1, ContextTokens: 2048, ITLSeconds: 0.005}, {Batch: 8, ContextTokens: 2048, ITLSeconds: 0.007},
			{Batch: 32, ContextTokens: 2048, ITLSeconds: 0.014},
		},
	}
}

// slower is p with every prefill (and decode) time multiplied by f: a
// cluster the profile underestimates.
func slower(p *profile.Profile, prefill, decode float64) *profile.Profile {
	q := *p
	q.Prefill = append([]profile.PrefillPoint(nil), p.Prefill...)
	q.Decode = append([]profile.DecodePoint(nil), p.Decode...)
	for i := range q.Prefill {
		q.Prefill[i].Seconds *= prefill
	}
	for i := range q.Decode {
		q.Decode[i].ITLSeconds *= decode
	}
	return &q
}

// testConfig plans for a 200 ms TTFT and a 20 ms ITL. At 512-token
// prompts and 256-token outputs the prefill pool needs 0.05 replicas per
// req/s (ρ_max 0.8) and the decode pool one per about 22 req/s.
func testConfig() Config {
	c := DefaultConfig()
	c.TTFT = 200 * time.Millisecond
	c.ITL = 20 * time.Millisecond
	return c
}

const (
	testISL = 512
	testOSL = 256
)

// cluster is a fake pair of pools. Replicas serve as soon as the planner
// desires them, with the latencies the M/M/1 model gives on the cluster's
// true profile, times a factor (the tail over the mean, or an error the
// profile does not show). Saturated pools report a p90 ten times the
// target and a long queue.
type cluster struct {
	truth                 model
	ttftFactor, itlFactor float64
	replicas              Replicas
	disaggregated         bool
	isl, osl              float64
	interval              time.Duration
}

func (c *cluster) observe(rate float64) Observation {
	l := load{rate: rate, isl: c.isl, osl: c.osl}
	o := Observation{Rate: rate, MeanISL: c.isl, MeanOSL: c.osl, Replicas: c.replicas,
		Samples: int(rate * c.interval.Seconds())}
	prefillers, rhoP := c.replicas.Prefill, 0.0
	prefillQ := &o.Prefill
	if !c.disaggregated {
		prefillers = c.replicas.Decode
		prefillQ = &o.Decode
		if prefillers > 0 {
			rhoP = rate * c.truth.prefillSeconds(c.isl) / float64(prefillers)
		}
	}
	if e, ok := c.truth.expectedTTFT(l, prefillers); ok {
		o.TTFTP90 = c.ttftFactor * e
		rho := rate * c.truth.prefillSeconds(c.isl) / float64(prefillers)
		prefillQ.Waiting += int(math.Round(float64(prefillers) * rho * rho / (1 - rho)))
	} else {
		o.TTFTP90, prefillQ.Waiting = 10*c.truth.ttft, prefillQ.Waiting+100
	}
	if e, ok := c.truth.expectedITL(l, c.replicas.Decode, rhoP); ok {
		o.ITLP90 = c.itlFactor * e
	} else {
		o.ITLP90, o.Decode.Waiting, o.Decode.KVUsage = 10*c.truth.itl, o.Decode.Waiting+100, 1
	}
	if o.Samples == 0 {
		o.TTFTP90, o.ITLP90 = 0, 0
	}
	return o
}

// harness steps a Planner against a cluster on a fake clock and checks,
// at every step, the invariants no configuration may break.
type harness struct {
	t       *testing.T
	cfg     Config
	p       *Planner
	c       *cluster
	now     time.Time
	log     []Decision
	lastObs Observation
}

func newHarness(t *testing.T, cfg Config, start Replicas) *harness {
	t.Helper()
	p, err := New(cfg, testProfile(), Predictors{})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, cfg: cfg, p: p, now: time.Unix(1_800_000_000, 0), c: &cluster{
		truth: p.m, ttftFactor: 1, itlFactor: 1, replicas: start, disaggregated: cfg.Disaggregated,
		isl: testISL, osl: testOSL, interval: cfg.Interval,
	}}
}

// step runs one interval at rate and applies the decision to the cluster.
func (h *harness) step(rate float64) Decision {
	h.t.Helper()
	h.lastObs = h.c.observe(rate)
	d := h.p.Step(h.now, h.lastObs)
	h.check(d)
	h.log = append(h.log, d)
	h.c.replicas.Decode = d.Decode.Desired
	if h.cfg.Disaggregated {
		h.c.replicas.Prefill = d.Prefill.Desired
	}
	h.now = h.now.Add(h.cfg.Interval)
	return d
}

// run steps n intervals at rate and returns the last decision.
func (h *harness) run(n int, rate float64) Decision {
	h.t.Helper()
	var d Decision
	for range n {
		d = h.step(rate)
	}
	return d
}

func (h *harness) check(d Decision) {
	h.t.Helper()
	pools := []struct {
		name string
		pd   PoolDecision
		lim  Limits
		prev int
	}{{"decode", d.Decode, h.cfg.Decode, h.c.replicas.Decode}}
	if h.cfg.Disaggregated {
		pools = append(pools, struct {
			name string
			pd   PoolDecision
			lim  Limits
			prev int
		}{"prefill", d.Prefill, h.cfg.Prefill, h.c.replicas.Prefill})
	} else if d.Prefill.Rule != RuleOff {
		h.t.Errorf("step %d: aggregated prefill rule %q, want off", len(h.log), d.Prefill.Rule)
	}
	total := 0
	for _, pl := range pools {
		got := pl.pd.Desired
		total += got
		switch {
		case got < pl.lim.Min || got > pl.lim.Max:
			h.t.Errorf("step %d: %s desired %d outside [%d, %d]: %s", len(h.log), pl.name, got, pl.lim.Min, pl.lim.Max, pl.pd.Reason)
		case len(h.log) > 0 && got > pl.prev+h.cfg.MaxStepUp:
			h.t.Errorf("step %d: %s up from %d to %d, over MaxStepUp %d", len(h.log), pl.name, pl.prev, got, h.cfg.MaxStepUp)
		case len(h.log) > 0 && got < pl.prev-1:
			h.t.Errorf("step %d: %s down from %d to %d, more than 1", len(h.log), pl.name, pl.prev, got)
		case pl.pd.Reason == "" || pl.pd.Rule == "":
			h.t.Errorf("step %d: %s has no rule or reason: %+v", len(h.log), pl.name, pl.pd)
		}
	}
	if total > h.cfg.budget() {
		h.t.Errorf("step %d: %d replicas desired, over budget %d", len(h.log), total, h.cfg.budget())
	}
}

// desired is one pool's Desired over the log.
func (h *harness) desired(decode bool) []int {
	out := make([]int, len(h.log))
	for i, d := range h.log {
		out[i] = d.Prefill.Desired
		if decode {
			out[i] = d.Decode.Desired
		}
	}
	return out
}

// directionChanges counts how often a sequence turns from rising to
// falling or back.
func directionChanges(xs []int) int {
	changes, dir := 0, 0
	for i := 1; i < len(xs); i++ {
		d := xs[i] - xs[i-1]
		if d == 0 {
			continue
		}
		s := 1
		if d < 0 {
			s = -1
		}
		if dir != 0 && s != dir {
			changes++
		}
		dir = s
	}
	return changes
}
