package policy

import (
	"errors"
	"fmt"
	"math"
	"time"

	"switchyard.dev/services/planner/internal/predict"
	"switchyard.dev/services/planner/internal/profile"
)

// Planner plans one model's pools, one Step per interval. It is not safe
// for concurrent use.
type Planner struct {
	cfg            Config
	m              model
	rate, isl, osl predict.Predictor
	sawISL, sawOSL bool
	// spread is the EWMA of the squared error of the rate's prediction:
	// how far an interval's arrivals stray from the forecast.
	spread, lastPredicted float64
	predicting            bool
	ttft, itl             correction
	prefill               pool
	decode                pool
}

// Predictors forecast the load. A nil Rate takes predict.Default(); a nil
// ISL or OSL takes the last observed value (predict.Constant): lengths
// drift slowly, and a trend fitted to them would extrapolate one odd
// interval's mix of requests.
type Predictors struct{ Rate, ISL, OSL predict.Predictor }

// New is a Planner for the model prof measured.
func New(cfg Config, prof *profile.Profile, preds Predictors) (*Planner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if prof == nil {
		return nil, errors.New("policy: no profile")
	}
	if err := prof.Validate(); err != nil {
		return nil, fmt.Errorf("policy: profile for %q: %w", prof.Model, err)
	}
	if preds.Rate == nil {
		preds.Rate = predict.Default()
	}
	if preds.ISL == nil {
		preds.ISL = &predict.Constant{}
	}
	if preds.OSL == nil {
		preds.OSL = &predict.Constant{}
	}
	return &Planner{
		cfg:  cfg,
		m:    model{prof: prof, ttft: cfg.TTFT.Seconds(), itl: cfg.ITL.Seconds()},
		rate: preds.Rate, isl: preds.ISL, osl: preds.OSL,
		ttft: newCorrection(), itl: newCorrection(),
	}, nil
}

// Config is the planner's configuration.
func (p *Planner) Config() Config { return p.cfg }

// Step plans the interval that starts at now from the observation of the
// one that just ended.
func (p *Planner) Step(now time.Time, obs Observation) Decision {
	obs = obs.sanitized()
	p.learn(obs)
	l, predicted, rate := p.forecast(obs)
	d := Decision{Rate: l.rate, PredictedRate: predicted, ISL: l.isl, OSL: l.osl,
		TTFTCorrection: p.ttft.v, ITLCorrection: p.itl.v}
	if !p.cfg.Disaggregated {
		d.Prefill = PoolDecision{Current: obs.Replicas.Prefill, Rule: RuleOff,
			Reason: "off: aggregated mode, the decode pool prefills", Correction: p.ttft.v}
		d.Decode = p.stepAggregated(now, obs, l, rate)
		return d
	}
	base := [2]int{p.prefill.base(obs.Replicas.Prefill), p.decode.base(obs.Replicas.Decode)}
	ts := [2]target{
		p.poolTarget(base[0], p.cfg.Prefill, l, func(l load) need { return p.m.prefill(l, p.ttft.v) }, rate, p.ttft.v),
		p.poolTarget(base[1], p.cfg.Decode, l, func(l load) need { return p.m.decode(l, p.itl.v) }, rate, p.itl.v),
	}
	ts[0].react(obs.Replicas.Prefill, p.overTTFT(obs, obs.Prefill))
	ts[1].react(obs.Replicas.Decode, p.overITL(obs, obs.Decode))
	for i, lim := range []Limits{p.cfg.Prefill, p.cfg.Decode} {
		ts[i].clamp(lim)
	}
	budget := p.cfg.budget()
	sp, sd := splitBudget(budget, share{ts[0].up, p.cfg.Prefill.Min}, share{ts[1].up, p.cfg.Decode.Min})
	ts[0].capBudget(sp, budget)
	ts[1].capBudget(sd, budget)

	pools := [2]*pool{&p.prefill, &p.decode}
	maxes := [2]int{p.cfg.Prefill.Max, p.cfg.Decode.Max}
	var outs [2]outcome
	for i := range pools {
		outs[i] = p.cfg.stabilize(pools[i], ts[i], base[i], maxes[i], now)
	}
	guardBudget(budget, [2]*outcome{&outs[0], &outs[1]}, [2]int{sp, sd}, [2]int{p.cfg.Prefill.Min, p.cfg.Decode.Min})
	current := [2]int{obs.Replicas.Prefill, obs.Replicas.Decode}
	var out [2]PoolDecision
	for i := range pools {
		pools[i].commit(outs[i], now)
		out[i] = p.render(ts[i], outs[i], current[i])
	}
	d.Prefill, d.Decode = out[0], out[1]
	return d
}

// stepAggregated plans the one pool of aggregated mode: TTFT and ITL are
// both its own, and the budget is its cap.
func (p *Planner) stepAggregated(now time.Time, obs Observation, l load, rate string) PoolDecision {
	base := p.decode.base(obs.Replicas.Decode)
	t := p.poolTarget(base, p.cfg.Decode, l, func(l load) need { return p.m.aggregated(l, p.ttft.v, p.itl.v) }, rate, p.itl.v)
	why := p.overTTFT(obs, obs.Decode)
	if why == "" {
		why = p.overITL(obs, obs.Decode)
	}
	t.react(obs.Replicas.Decode, why)
	t.clamp(p.cfg.Decode)
	t.capBudget(p.cfg.budget(), p.cfg.budget())
	o := p.cfg.stabilize(&p.decode, t, base, min(p.cfg.Decode.Max, p.cfg.budget()), now)
	p.decode.commit(o, now)
	return p.render(t, o, obs.Replicas.Decode)
}

// poolTarget is a pool's target from the model, before the reactive rule
// and the bounds.
func (p *Planner) poolTarget(base int, lim Limits, l load, needAt func(load) need, rate string, corr float64) target {
	if l.rate > 0 && (!p.sawISL || !p.sawOSL) {
		return noDataTarget(base, corr)
	}
	return modelTarget(needAt(l), needAt(l.scaled(1+p.cfg.DownMargin)), lim, rate, corr)
}

// learn updates the corrections from an interval with enough finished
// requests, comparing its observed p90s with what the model expects at
// its observed load and serving replicas.
func (p *Planner) learn(obs Observation) {
	if obs.Samples < p.cfg.MinSamples || obs.MeanISL <= 0 || obs.MeanOSL <= 0 {
		return
	}
	l := load{rate: obs.Rate, isl: obs.MeanISL, osl: obs.MeanOSL}
	w := p.cfg.CorrectionWeight
	prefillers, rhoP := obs.Replicas.Prefill, 0.0
	if !p.cfg.Disaggregated {
		prefillers = obs.Replicas.Decode
		if prefillers > 0 {
			rhoP = l.rate * p.m.prefillSeconds(l.isl) / float64(prefillers)
		}
	}
	if e, ok := p.m.expectedTTFT(l, prefillers); ok {
		p.ttft.update(obs.TTFTP90, e, w)
	}
	if e, ok := p.m.expectedITL(l, obs.Replicas.Decode, rhoP); ok {
		p.itl.update(obs.ITLP90, e, w)
	}
}

// forecast feeds the predictors and returns the load to plan for. The rate
// is the larger of the prediction and the rate just observed: a predicted
// fall is acted on once it shows (scale-downs wait DownStable intervals
// anyway), while planning below the load already arriving would queue it.
// rate says which of the two it is, for reasons.
func (p *Planner) forecast(obs Observation) (l load, predicted float64, rate string) {
	if p.predicting {
		e := obs.Rate - p.lastPredicted
		p.spread += p.cfg.CorrectionWeight * (e*e - p.spread)
	}
	p.rate.Observe(obs.Rate)
	if obs.Samples > 0 && obs.MeanISL > 0 {
		p.isl.Observe(obs.MeanISL)
		p.sawISL = true
	}
	if obs.Samples > 0 && obs.MeanOSL > 0 {
		p.osl.Observe(obs.MeanOSL)
		p.sawOSL = true
	}
	predicted = p.rate.Predict()
	p.lastPredicted, p.predicting = predicted, true
	// Arrivals are bursty: plan for the forecast plus RateSpread standard
	// errors of it, so an interval that brings more than forecast does
	// not queue behind a pool sized for the mean.
	planned := predicted + p.cfg.RateSpread*math.Sqrt(p.spread)
	l = load{rate: max(planned, obs.Rate), isl: p.isl.Predict(), osl: p.osl.Predict()}
	rate = fmt.Sprintf("predicted %.4g req/s", predicted)
	if obs.Rate > predicted {
		rate = fmt.Sprintf("observed %.4g req/s", obs.Rate)
	}
	return l, predicted, rate
}

// overTTFT is the reactive rule's finding for TTFT against queue q, or "".
func (p *Planner) overTTFT(obs Observation, q Queue) string {
	if obs.TTFTP90 <= p.m.ttft*(1+p.cfg.Slack) || q.Waiting == 0 {
		return ""
	}
	return fmt.Sprintf("p90 TTFT %v over target %v with %d waiting", seconds(obs.TTFTP90), p.cfg.TTFT, q.Waiting)
}

// overITL is the reactive rule's finding for ITL against queue q, or "".
// A decode pool is backlogged with requests waiting or with its KV cache
// nearly full (it is about to refuse or preempt sequences).
func (p *Planner) overITL(obs Observation, q Queue) string {
	if obs.ITLP90 <= p.m.itl*(1+p.cfg.Slack) {
		return ""
	}
	switch {
	case q.Waiting > 0:
		return fmt.Sprintf("p90 ITL %v over target %v with %d waiting", seconds(obs.ITLP90), p.cfg.ITL, q.Waiting)
	case q.KVUsage >= kvFull:
		return fmt.Sprintf("p90 ITL %v over target %v with KV %.0f%% full", seconds(obs.ITLP90), p.cfg.ITL, 100*q.KVUsage)
	}
	return ""
}

// render is a pool's decision: its Rule and a Reason that names it.
func (p *Planner) render(t target, o outcome, current int) PoolDecision {
	d := PoolDecision{Current: current, Model: t.model, Desired: o.desired, Infeasible: t.infeasible, Correction: t.corr}
	delta := o.desired - o.base
	act := "hold"
	switch {
	case delta > 0:
		act = fmt.Sprintf("up %d", delta)
	case delta < 0:
		act = fmt.Sprintf("down %d", -delta)
	}
	switch {
	case o.cut:
		d.Rule = RuleBudget
		d.Reason = fmt.Sprintf("%s, capped by budget %d: %s", act, p.cfg.budget(), t.why)
	case o.overMax:
		d.Rule = RuleMax
		d.Reason = fmt.Sprintf("%s, capped by max %d: %s", act, o.desired, t.why)
	case o.held != "":
		d.Rule, d.Reason = o.held, "hold: "+o.note
	case delta < 0:
		d.Rule, d.Reason = RuleDown, act+": "+o.note
	default:
		d.Rule = t.rule
		if t.rule == RuleUp && delta == 0 {
			d.Rule = RuleHold
		}
		d.Reason = act + t.qual + ": " + t.why
		if t.up < o.desired && d.Rule == RuleHold {
			d.Reason += fmt.Sprintf("; %d kept: %d would leave under %.0f%% headroom", o.desired, o.desired-1, 100*p.cfg.DownMargin)
		}
	}
	return d
}
