package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/libs/mesh/discovery"

	"switchyard.dev/services/planner/internal/actuate"
	"switchyard.dev/services/planner/internal/leader"
	"switchyard.dev/services/planner/internal/observe"
	"switchyard.dev/services/planner/internal/policy"
	"switchyard.dev/services/planner/internal/predict"
	"switchyard.dev/services/planner/internal/profile"
)

// planner is the service: it watches the pools, and every interval
// observes each model, plans it, and (as the leader, with an actuator)
// scales it.
type planner struct {
	reg      discovery.Registry
	cfg      flags
	profiles map[string]*profile.Profile // by model
	act      actuate.Actuator            // nil: plan and report only
	lock     leader.Lock                 // nil: always the leader
	log      *slog.Logger
	metrics  *metrics
	http     *http.Client
	copts    []connect.ClientOption // for GetLoad
	scraper  *observe.Frontends
	ro       *rollouts
	now      func() time.Time

	mu       sync.Mutex
	pools    map[string][]discovery.Instance // by role
	models   map[string]*modelState
	isLeader bool
	decided  time.Time
}

// modelState is one model's planner and what it last decided.
type modelState struct {
	planner *policy.Planner
	disagg  bool
	signals *plannerv1.ModelSignals
	pools   map[string]*poolState // by role
}

// poolState is one pool's last decision and actuation.
type poolState struct {
	status  *plannerv1.PoolStatus
	upSince time.Time // a scale-up asked for and not yet serving
	upTo    int
}

func newPlanner(reg discovery.Registry) *planner {
	return &planner{reg: reg, pools: map[string][]discovery.Instance{}, models: map[string]*modelState{},
		profiles: map[string]*profile.Profile{}, log: slog.New(slog.DiscardHandler), now: time.Now,
		http: http.DefaultClient, scraper: observe.NewFrontends(nil)}
}

func (p *planner) watch(ctx context.Context, log *slog.Logger) error {
	roles := []string{discovery.RolePrefill, discovery.RoleDecode, discovery.RoleFrontend}
	return discovery.WatchRoles(ctx, p.reg, log, roles, func(latest map[string][]discovery.Instance) {
		p.mu.Lock()
		p.pools = latest
		p.mu.Unlock()
	})
}

// run plans every interval until ctx ends.
func (p *planner) run(ctx context.Context) {
	t := time.NewTicker(p.cfg.policy.Interval)
	defer t.Stop()
	defer func() {
		if p.lock != nil {
			_ = p.lock.Release()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.step(ctx)
		}
	}
}

// step is one interval: observe, plan, act.
func (p *planner) step(ctx context.Context) {
	now := p.now()
	was := p.leading()
	leading := p.lead(ctx)
	fresh := leading && !was
	p.mu.Lock()
	pools := p.pools
	p.mu.Unlock()
	var workers []discovery.Instance
	for _, role := range []string{discovery.RolePrefill, discovery.RoleDecode} {
		workers = append(workers, pools[role]...)
	}
	windows, errs := p.scraper.Scrape(ctx, pools[discovery.RoleFrontend])
	switch {
	case p.ro == nil:
	case leading:
		p.ro.lead(ctx, fresh, p.scraper.Versions())
	default:
		p.ro.standby(ctx)
	}
	loads, lerrs := observe.Loads(ctx, p.http, workers, p.cfg.sampleTimeout, p.copts...)
	for _, err := range append(errs, lerrs...) {
		p.log.Warn("planner input missing this interval", "err", err)
	}
	byModel := map[string][]observe.Load{}
	for _, l := range loads {
		byModel[l.Model] = append(byModel[l.Model], l)
	}
	models := map[string]bool{}
	for _, w := range workers {
		models[w.Model] = true
	}
	for m := range models {
		p.planModel(ctx, now, m, leading, windows[m], byModel[m], pools)
	}
	p.mu.Lock()
	for m := range p.models {
		if !models[m] {
			delete(p.models, m) // no worker left: nothing to plan
		}
	}
	p.decided = now
	p.mu.Unlock()
}

func (p *planner) leading() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isLeader
}

// lead tries the leader lock; without one a planner always leads.
func (p *planner) lead(ctx context.Context) bool {
	held := true
	if p.lock != nil {
		lost, ok, err := p.lock.TryAcquire(ctx)
		if err != nil {
			p.log.Warn("leader lock", "err", err)
		}
		held = ok
		if ok {
			select {
			case <-lost:
				held = false
			default:
			}
		}
	}
	p.mu.Lock()
	if held != p.isLeader {
		p.log.Info("leadership changed", "leader", held)
	}
	p.isLeader = held
	p.mu.Unlock()
	p.metrics.leader.Set(b2f(held))
	return held
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (p *planner) planModel(ctx context.Context, now time.Time, model string, leading bool, w *observe.Window, loads []observe.Load, pools map[string][]discovery.Instance) {
	count := func(role string) int {
		n := 0
		for _, in := range pools[role] {
			if in.Model == model {
				n++
			}
		}
		return n
	}
	served := policy.Replicas{Prefill: count(discovery.RolePrefill), Decode: count(discovery.RoleDecode)}
	disagg := served.Prefill > 0
	st := p.state(model, disagg)
	obs := policy.Observation{Replicas: served}
	sig := &plannerv1.ModelSignals{Model: model, TtftTargetSeconds: p.cfg.policy.TTFT.Seconds(), ItlTargetSeconds: p.cfg.policy.ITL.Seconds()}
	if w != nil {
		obs.Rate, obs.MeanISL, obs.MeanOSL, obs.Samples = w.Rate, w.MeanISL, w.MeanOSL, int(w.Generations)
		obs.TTFTP90, obs.ITLP90 = w.TTFT.Quantile(0.9), w.ITL.Quantile(0.9)
		sig.RequestRate, sig.MeanInputTokens, sig.MeanOutputTokens = w.Rate, w.MeanISL, w.MeanOSL
		sig.TtftP90Seconds, sig.ItlP90Seconds = obs.TTFTP90, obs.ITLP90
	}
	var kv [2]float64
	var kvN [2]int
	for _, l := range loads {
		i, q := 1, &obs.Decode
		if l.Role == discovery.RolePrefill {
			i, q = 0, &obs.Prefill
		}
		q.Waiting += l.Waiting
		kv[i] += l.KVUsage
		kvN[i]++
	}
	if kvN[0] > 0 {
		obs.Prefill.KVUsage = kv[0] / float64(kvN[0])
	}
	if kvN[1] > 0 {
		obs.Decode.KVUsage = kv[1] / float64(kvN[1])
	}
	roles := []string{discovery.RoleDecode}
	if disagg {
		roles = []string{discovery.RolePrefill, discovery.RoleDecode}
	}
	// The step's pool states are new ones, published whole under the
	// lock: GetPlan reads the last step's meanwhile.
	states := map[string]*poolState{}
	if st.planner == nil {
		for _, role := range roles {
			states[role] = &poolState{status: &plannerv1.PoolStatus{Model: model, Role: role, Observed: uint32(count(role)),
				Desired: uint32(count(role)), Rule: "observe", Reason: "observe-only: no profile for this model (-profile)"}}
		}
		p.publish(model, st, sig, states)
		return
	}
	// The actuator's count includes replicas still starting: the step
	// counts from what is asked for, not only what serves yet.
	current := map[string]int{}
	if leading && p.act != nil {
		for _, role := range roles {
			if n, err := p.act.Replicas(ctx, actuate.Pool{Model: model, Role: role}); err == nil {
				current[role] = n
			} else {
				p.log.Warn("actuator replicas", "model", model, "role", role, "err", err)
			}
		}
		obs.Replicas.Prefill = max(obs.Replicas.Prefill, current[discovery.RolePrefill])
		obs.Replicas.Decode = max(obs.Replicas.Decode, current[discovery.RoleDecode])
	}
	d := st.planner.Step(now, obs)
	sig.PredictedRate = d.PredictedRate
	for _, role := range roles {
		pd := d.Decode
		if role == discovery.RolePrefill {
			pd = d.Prefill
		}
		ps := &poolState{}
		if last := st.pools[role]; last != nil { // written only by this goroutine
			ps.upSince, ps.upTo = last.upSince, last.upTo
		}
		states[role] = ps
		ps.status = &plannerv1.PoolStatus{Model: model, Role: role, Observed: uint32(count(role)), Desired: uint32(pd.Desired),
			Reason: pd.Reason, Rule: string(pd.Rule), Infeasible: pd.Infeasible, Correction: pd.Correction, ModelReplicas: uint32(pd.Model)}
		p.metrics.decided(model, role, pd)
		p.trackUp(now, model, role, ps, count(role))
		if !leading {
			ps.status.Reason = "standby (another planner leads): " + ps.status.Reason
			continue
		}
		if p.act == nil {
			continue
		}
		cur, ok := current[role]
		if !ok || cur == pd.Desired {
			continue
		}
		err := p.act.Scale(ctx, actuate.Pool{Model: model, Role: role}, pd.Desired, victims(loads, role))
		switch {
		case err == nil:
			p.log.Info("scaled", "model", model, "role", role, "from", cur, "to", pd.Desired, "rule", pd.Rule, "reason", pd.Reason)
			p.metrics.scaled(model, role, pd.Desired-cur)
			switch {
			case pd.Desired < cur:
				ps.upSince = time.Time{} // a scale-up overtaken by a scale-down is not measured
			case ps.upSince.IsZero():
				ps.upSince, ps.upTo = now, pd.Desired
			default:
				ps.upTo = pd.Desired
			}
		case errors.Is(err, actuate.ErrBlocked):
			ps.status.Pending, ps.status.ActuatorError = true, err.Error()
			p.log.Info("scaling deferred; retried next interval", "model", model, "role", role, "to", pd.Desired, "err", err)
		default:
			ps.status.Pending, ps.status.ActuatorError = true, err.Error()
			p.metrics.actuatorErrors.WithLabelValues(model, role).Inc()
			p.log.Warn("scaling failed; retried next interval", "model", model, "role", role, "to", pd.Desired, "err", err)
		}
	}
	p.publish(model, st, sig, states)
}

// trackUp measures a scale-up from the decision to the replicas serving
// (registered in discovery).
func (p *planner) trackUp(now time.Time, model, role string, ps *poolState, serving int) {
	if ps.upSince.IsZero() || serving < ps.upTo {
		return
	}
	p.metrics.scaleUp.WithLabelValues(model, role).Observe(now.Sub(ps.upSince).Seconds())
	ps.upSince = time.Time{}
}

// victims orders a pool's workers for a scale-down, least busy first.
func victims(loads []observe.Load, role string) []string {
	var ls []observe.Load
	for _, l := range loads {
		if l.Role == role {
			ls = append(ls, l)
		}
	}
	slices.SortStableFunc(ls, func(a, b observe.Load) int {
		return cmp.Or(cmp.Compare(a.Busy(), b.Busy()), strings.Compare(a.ID, b.ID))
	})
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

// state returns model's state, making its planner when it has a profile
// (again when the mode changed: a prefill pool appeared or went).
func (p *planner) state(model string, disagg bool) *modelState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.models[model]
	if st != nil && (st.planner == nil || st.disagg == disagg) {
		return st
	}
	st = &modelState{disagg: disagg, pools: map[string]*poolState{}}
	if prof := p.profiles[model]; prof != nil {
		cfg := p.cfg.policy
		cfg.Disaggregated = disagg
		rate, _ := predict.Parse(p.cfg.predictor) // checked by the flags
		pl, err := policy.New(cfg, prof, policy.Predictors{Rate: rate})
		if err != nil {
			p.log.Error("cannot plan model", "model", model, "err", err)
		} else {
			st.planner = pl
		}
	}
	p.models[model] = st
	return st
}

func (p *planner) publish(model string, st *modelState, sig *plannerv1.ModelSignals, pools map[string]*poolState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st.signals, st.pools = sig, pools
	p.models[model] = st
}

// GetPlan implements PlannerServiceHandler.
func (p *planner) GetPlan(context.Context, *connect.Request[plannerv1.GetPlanRequest]) (*connect.Response[plannerv1.GetPlanResponse], error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := &plannerv1.GetPlanResponse{Leader: p.isLeader}
	switch {
	case len(p.profiles) == 0:
		res.Reason = "observe-only: no profile given (-profile)"
	case !p.isLeader:
		res.Reason = "standby: another planner holds the leader lock"
	case p.act == nil:
		res.Reason = "planning; not acting (-actuator none)"
	default:
		res.Reason = "planning and acting through " + p.cfg.actuator
	}
	if !p.decided.IsZero() {
		res.DecidedAt = timestamppb.New(p.decided)
	}
	seen := map[string]bool{}
	for m, st := range p.models {
		for _, ps := range st.pools {
			res.Pools = append(res.Pools, ps.status)
			seen[m+"/"+ps.status.Role] = true
		}
		if st.signals != nil {
			res.Signals = append(res.Signals, st.signals)
		}
	}
	// Pools seen in discovery but not planned yet (before the first step).
	counts := map[[2]string]uint32{}
	for role, ins := range p.pools {
		if role == discovery.RoleFrontend {
			continue
		}
		for _, in := range ins {
			counts[[2]string{in.Model, role}]++
		}
	}
	for k, n := range counts {
		if !seen[k[0]+"/"+k[1]] {
			res.Pools = append(res.Pools, &plannerv1.PoolStatus{Model: k[0], Role: k[1], Observed: n, Desired: n, Rule: "observe",
				Reason: "not planned yet"})
		}
	}
	slices.SortFunc(res.Pools, func(a, b *plannerv1.PoolStatus) int {
		return cmp.Or(strings.Compare(a.Model, b.Model), strings.Compare(a.Role, b.Role))
	})
	slices.SortFunc(res.Signals, func(a, b *plannerv1.ModelSignals) int { return strings.Compare(a.Model, b.Model) })
	return connect.NewResponse(res), nil
}

// loadProfiles reads each -profile file, keyed by the model it names.
func loadProfiles(paths []string) (map[string]*profile.Profile, error) {
	out := map[string]*profile.Profile{}
	for _, path := range paths {
		prof, err := profile.Load(path, "")
		if err != nil {
			return nil, err
		}
		if _, dup := out[prof.Model]; dup {
			return nil, fmt.Errorf("profile %s: a second profile for model %q", path, prof.Model)
		}
		out[prof.Model] = prof
	}
	return out, nil
}
