// Package plansim runs the planner's own decisions on a virtual clock over
// simulated engines, so a policy can be evaluated on a whole trace in
// seconds: each replica is a real libs/engine scheduler and block manager
// whose steps take the sim executor's time (as routesim's workers do),
// requests go to the least-loaded serving replica, and every interval the
// planner (services/planner/internal/policy) sees the interval's
// observations, as the live planner does from the frontends' metrics, and
// its desired count is applied: a new replica serves StartupDelay after the
// decision, a removed one drains (takes no new requests, finishes its own)
// and then stops. A static pool of a fixed size runs the same way, for
// comparison.
//
// Serving is aggregated (each replica prefills and decodes), as `make
// bench`'s sim workers are; routing is least-loaded, not KV-aware, so the
// comparison between planner and static pools is about capacity alone.
package plansim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/engine/sim"

	"switchyard.dev/services/planner/internal/policy"
	"switchyard.dev/services/planner/internal/predict"
	"switchyard.dev/services/planner/internal/profile"
)

// Request is one request of a replay.
type Request struct {
	Arrival time.Duration
	Prompt  []uint32
	Output  int
}

// Config is a run.
type Config struct {
	// Engine and ContextLen configure each replica, as a sim worker's
	// flags do; Timing is its step time (default sim.Polynomial).
	Engine     engine.Config
	ContextLen int
	Timing     sim.Timing
	// Static, when > 0, runs a fixed pool of that many replicas and no
	// planner.
	Static int
	// Policy, Profile and Predictor configure the planner (Policy's
	// Disaggregated must be false: the replicas are aggregated).
	Policy    policy.Config
	Profile   *profile.Profile
	Predictor string
	// Initial is the planner's pool at the start (default Policy's
	// Decode.Min).
	Initial int
	// StartupDelay is how long a replica takes from the decision to
	// serving (default 2 s).
	StartupDelay time.Duration
	// SLATTFT and SLAITL are the thresholds a request violates (its TTFT,
	// its mean ITL); default the planner's targets. The planner keeps the
	// p90 at its targets, so targets below the SLA leave the headroom the
	// tail needs.
	SLATTFT, SLAITL time.Duration
}

// Result is a run's outcome.
type Result struct {
	Requests, Failed int
	// Violations counts requests whose TTFT or mean ITL was over the SLA
	// (SLATTFT, SLAITL), and those that failed.
	Violations  int
	TTFTs, ITLs []time.Duration // per finished request (ITL: its mean)
	// Violated holds the arrival time of each violating request.
	Violated       []time.Duration `json:"-"`
	ReplicaSeconds float64
	End            time.Duration
	// ScaleUps and ScaleDowns count replicas added and removed;
	// DirectionChanges how often the pool went from growing to shrinking
	// or back.
	ScaleUps, ScaleDowns, DirectionChanges int
	// BreachToServing is, for each interval that saw a p90 over target
	// and added replicas, the time from that interval's end to the first
	// request the first added replica served.
	BreachToServing []time.Duration
	// Timeline is one point per interval.
	Timeline []Point
}

// Point is the pool at one interval's end.
type Point struct {
	At               time.Duration
	Serving, Desired int
	Rate, TTFTP90    float64
	Rule             policy.Rule
	Reason           string
}

// ViolationRate is Violations over Requests.
func (r *Result) ViolationRate() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Violations) / float64(r.Requests)
}

type eventKind uint8

const (
	evArrival eventKind = iota
	evStep              // a replica's step ends
	evReady             // a replica starts serving
	evTick              // the planner's interval ends
)

type event struct {
	at      time.Duration
	kind    eventKind
	replica int
	seq     uint64 // tie-break: events at one time run in push order
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(a, b int) bool {
	if q[a].at != q[b].at {
		return q[a].at < q[b].at
	}
	return q[a].seq < q[b].seq
}
func (q events) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type replicaState uint8

const (
	starting replicaState = iota
	serving
	draining
	stopped
)

type replica struct {
	core     *engine.Core
	state    replicaState
	plan     *sched.Plan
	reqs     map[uint64]*inflight
	born     time.Duration // when it was decided: it costs from then
	died     time.Duration
	served   bool          // it has taken a request
	breachAt time.Duration // >= 0: added for a breach seen then
}

type inflight struct {
	arrived, first  time.Duration
	last            time.Duration
	generated, want int
	prompt, cached  int
}

type run struct {
	cfg      Config
	q        events
	nseq     uint64
	now      time.Duration
	replicas []*replica
	planner  *policy.Planner
	next     func() (Request, bool)
	pending  *Request
	res      Result
	nextID   uint64
	// the current interval's observations
	arrivals  int
	finished  []*inflight
	firsts    []time.Duration // TTFTs of first tokens in the interval
	itls      []time.Duration // mean ITLs of requests finished in it
	lastDelta int             // sign of the last change of the pool
}

// Run replays reqs.
func Run(ctx context.Context, cfg Config, reqs iter.Seq[Request]) (*Result, error) {
	if cfg.Timing == nil {
		cfg.Timing = sim.Polynomial{}
	}
	if cfg.StartupDelay == 0 {
		cfg.StartupDelay = 2 * time.Second
	}
	if cfg.SLATTFT == 0 {
		cfg.SLATTFT = cfg.Policy.TTFT
	}
	if cfg.SLAITL == 0 {
		cfg.SLAITL = cfg.Policy.ITL
	}
	r := &run{cfg: cfg}
	initial := cfg.Static
	if cfg.Static <= 0 {
		if cfg.Policy.Disaggregated {
			return nil, errors.New("plansim: the replicas are aggregated: Policy.Disaggregated must be false")
		}
		pred, err := predict.Parse(cfg.Predictor)
		if err != nil {
			return nil, fmt.Errorf("plansim: %w", err)
		}
		if r.planner, err = policy.New(cfg.Policy, cfg.Profile, policy.Predictors{Rate: pred}); err != nil { // lengths: the last observed
			return nil, fmt.Errorf("plansim: %w", err)
		}
		initial = max(cfg.Initial, cfg.Policy.Decode.Min, 1)
	}
	for range initial {
		if err := r.add(-1, true); err != nil {
			return nil, err
		}
	}
	next, stop := iter.Pull(reqs)
	defer stop()
	r.next = next
	r.loadNext()
	if r.planner != nil {
		r.push(event{at: cfg.Policy.Interval, kind: evTick})
	}
	for r.q.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e := heap.Pop(&r.q).(event)
		r.now = e.at
		switch e.kind {
		case evArrival:
			r.arrive()
		case evStep:
			r.finishStep(e.replica)
		case evReady:
			if rp := r.replicas[e.replica]; rp.state == starting {
				rp.state = serving
			}
		case evTick:
			r.tick()
			if r.pending != nil || r.busy() {
				r.push(event{at: r.now + cfg.Policy.Interval, kind: evTick})
			}
		}
	}
	r.res.End = r.now
	for _, rp := range r.replicas {
		end := rp.died
		if rp.state != stopped {
			end = r.now
		}
		r.res.ReplicaSeconds += (end - rp.born).Seconds()
	}
	return &r.res, nil
}

func (r *run) push(e event) {
	r.nseq++
	e.seq = r.nseq
	heap.Push(&r.q, e)
}

func (r *run) loadNext() {
	q, ok := r.next()
	if !ok {
		r.pending = nil
		return
	}
	r.pending = &q
	r.push(event{at: max(q.Arrival, r.now), kind: evArrival})
}

func (r *run) busy() bool {
	for _, rp := range r.replicas {
		if len(rp.reqs) > 0 {
			return true
		}
	}
	return false
}

// add starts a replica, serving at once (the initial pool) or after the
// start-up delay. breachAt >= 0 marks one added for a breach.
func (r *run) add(breachAt time.Duration, now bool) error {
	core, err := engine.NewCore(r.cfg.Engine, executor.Model{Name: "sim", ContextLen: r.cfg.ContextLen})
	if err != nil {
		return fmt.Errorf("plansim: %w", err)
	}
	rp := &replica{core: core, reqs: map[uint64]*inflight{}, born: r.now, breachAt: breachAt}
	r.replicas = append(r.replicas, rp)
	if now {
		rp.state = serving
	} else {
		r.push(event{at: r.now + r.cfg.StartupDelay, kind: evReady, replica: len(r.replicas) - 1})
	}
	return nil
}

func (r *run) arrive() {
	q := r.pending
	r.loadNext()
	r.res.Requests++
	r.arrivals++
	best := -1
	for j, rp := range r.replicas {
		if rp.state != serving {
			continue
		}
		if best < 0 || load(rp) < load(r.replicas[best]) {
			best = j
		}
	}
	if best < 0 || len(q.Prompt) >= r.replicas[best].core.MaxLen {
		r.res.Failed++
		r.res.Violations++
		return
	}
	rp := r.replicas[best]
	if !rp.served {
		rp.served = true
		if rp.breachAt >= 0 {
			r.res.BreachToServing = append(r.res.BreachToServing, r.now-rp.breachAt)
		}
	}
	r.nextID++
	seq := &sched.Seq{ID: r.nextID, Tokens: slices.Clone(q.Prompt), PromptLen: len(q.Prompt)}
	rp.reqs[seq.ID] = &inflight{arrived: r.now, want: max(q.Output, 1), prompt: len(q.Prompt)}
	rp.core.Sched.Add(seq)
	r.startStep(best)
}

func load(rp *replica) int { return rp.core.Sched.Running() + rp.core.Sched.Waiting() }

func (r *run) startStep(ri int) {
	rp := r.replicas[ri]
	if rp.plan != nil {
		return
	}
	s := rp.core.Sched
	for s.Waiting()+s.Running() > 0 {
		p := s.Schedule()
		for _, q := range p.Failed {
			r.res.Failed++
			r.res.Violations++
			delete(rp.reqs, q.ID)
		}
		if len(p.Items) > 0 {
			var b executor.Batch
			engine.StepStats(&b, p, rp.core.KV)
			rp.plan = p
			r.push(event{at: r.now + r.cfg.Timing.StepTime(&b), kind: evStep, replica: ri})
			return
		}
		if len(p.Preempted) == 0 && len(p.Failed) == 0 {
			break
		}
	}
	r.maybeStop(ri)
}

func (r *run) finishStep(ri int) {
	rp := r.replicas[ri]
	p := rp.plan
	rp.plan = nil
	sampled := make([]uint32, len(p.Items))
	for i, it := range p.Items {
		sampled[i] = 300 + uint32((it.Seq.ID*2654435761+uint64(it.End))%30000)
	}
	rp.core.Sched.Complete(p, sampled)
	for _, it := range p.Items {
		if !it.Sample || !it.Seq.Running() {
			continue
		}
		f := rp.reqs[it.Seq.ID]
		f.generated++
		if f.generated == 1 {
			f.first = r.now
			f.cached = it.Seq.CachedPromptTokens()
			r.firsts = append(r.firsts, r.now-f.arrived)
		}
		f.last = r.now
		if f.generated >= f.want || len(it.Seq.Tokens) >= rp.core.MaxLen {
			rp.core.Sched.Finish(it.Seq)
			delete(rp.reqs, it.Seq.ID)
			r.done(f)
		}
	}
	r.startStep(ri)
}

func (r *run) done(f *inflight) {
	ttft := f.first - f.arrived
	itl := time.Duration(0)
	if f.generated > 1 {
		itl = (f.last - f.first) / time.Duration(f.generated-1)
	}
	r.res.TTFTs = append(r.res.TTFTs, ttft)
	r.res.ITLs = append(r.res.ITLs, itl)
	if ttft > r.cfg.SLATTFT || itl > r.cfg.SLAITL {
		r.res.Violations++
		r.res.Violated = append(r.res.Violated, f.arrived)
	}
	r.finished = append(r.finished, f)
	if f.generated > 1 {
		r.itls = append(r.itls, itl)
	}
}

// maybeStop stops a draining replica with nothing left.
func (r *run) maybeStop(ri int) {
	rp := r.replicas[ri]
	if rp.state == draining && len(rp.reqs) == 0 && rp.plan == nil {
		rp.state, rp.died = stopped, r.now
		_ = rp.core.KV.Close()
	}
}

// tick is the planner's interval: observe, decide, apply.
func (r *run) tick() {
	interval := r.cfg.Policy.Interval.Seconds()
	obs := policy.Observation{Rate: float64(r.arrivals) / interval, Samples: len(r.finished)}
	for _, f := range r.finished {
		obs.MeanISL += float64(f.prompt - f.cached)
		obs.MeanOSL += float64(f.generated)
	}
	if n := float64(len(r.finished)); n > 0 {
		obs.MeanISL /= n
		obs.MeanOSL /= n
	}
	obs.TTFTP90 = Quantile(r.firsts, 0.9).Seconds()
	obs.ITLP90 = Quantile(r.itls, 0.9).Seconds()
	live, servingN := 0, 0
	var kv float64
	for _, rp := range r.replicas {
		switch rp.state {
		case serving:
			servingN++
			obs.Decode.Waiting += rp.core.Sched.Waiting()
			kv += float64(rp.core.KV.Used()) / float64(rp.core.KV.NumBlocks())
			live++
		case starting:
			live++
		}
	}
	if servingN > 0 {
		obs.Decode.KVUsage = kv / float64(servingN)
	}
	obs.Replicas.Decode = live
	d := r.planner.Step(time.Unix(0, 0).Add(r.now), obs)
	want := d.Decode.Desired
	r.res.Timeline = append(r.res.Timeline, Point{At: r.now, Serving: servingN, Desired: want, Rate: obs.Rate,
		TTFTP90: obs.TTFTP90, Rule: d.Decode.Rule, Reason: d.Decode.Reason})
	breach := obs.TTFTP90 > r.cfg.SLATTFT.Seconds() || obs.ITLP90 > r.cfg.SLAITL.Seconds()
	switch {
	case want > live:
		at := time.Duration(-1)
		if breach {
			at = r.now
		}
		for range want - live {
			_ = r.add(at, false)
		}
		r.res.ScaleUps += want - live
		r.turn(+1)
	case want < live:
		for range live - want {
			r.drainOne()
		}
		r.res.ScaleDowns += live - want
		r.turn(-1)
	}
	r.arrivals, r.finished, r.firsts, r.itls = 0, r.finished[:0], r.firsts[:0], r.itls[:0]
}

func (r *run) turn(dir int) {
	if r.lastDelta != 0 && dir != r.lastDelta {
		r.res.DirectionChanges++
	}
	r.lastDelta = dir
}

// drainOne drains the least-loaded live replica; a starting one first, as
// it serves nobody yet.
func (r *run) drainOne() {
	best := -1
	for j, rp := range r.replicas {
		if rp.state != serving && rp.state != starting {
			continue
		}
		if best < 0 || (rp.state == starting && r.replicas[best].state != starting) ||
			(rp.state == r.replicas[best].state && load(rp) < load(r.replicas[best])) {
			best = j
		}
	}
	if best < 0 {
		return
	}
	r.replicas[best].state = draining
	r.maybeStop(best)
}

// Quantile is the q-quantile of ts (nearest rank).
func Quantile(ts []time.Duration, q float64) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	i := max(int(math.Ceil(q*float64(len(s))))-1, 0)
	return s[i]
}
