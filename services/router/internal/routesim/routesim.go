// Package routesim replays a request trace through simulated workers on a
// virtual clock, routed by the router's own decision code.
//
// A live replay (`make bench`: loadtest, frontend, router and eight sim
// workers as processes) takes half an hour for a whole Mooncake trace on a
// small machine, its numbers move with the host's CPU contention, and so a
// routing idea costs an afternoon to judge. Here the same parts run in one
// goroutine: route.Router decides (radix index, predicted load, policy
// profile, exactly as the service), each worker is the engine's scheduler
// and block manager as engine.NewCore builds them for a live engine,
// stepped by the sim's timing model, and every step's KV events go into
// the router's index as the step ends. When the router names a prefix
// source (prefix pull, on by default), the worker copies the blocks it
// lacks from that worker, Config.PullBlockTime a block, while the request
// waits in its place in the queue, as a live worker's disagg.Decoder and
// engine do (pull.go). Time is virtual, so a whole
// trace takes seconds, the same inputs give the same numbers, and tests can
// assert on them.
//
// What it leaves out is everything between those parts: the network, the
// frontend, the delay of KV events and load reports, and the host's CPU.
// docs/benchmarks.md compares its numbers with live runs.
package routesim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mooncake"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/policy"
	"switchyard.dev/services/router/internal/route"
)

// Config describes the simulated fleet and the router in front of it.
// Zero fields take the defaults of `make bench`'s live services.
type Config struct {
	Workers int    // default 8
	Mode    string // router mode; default policy.ModeKV
	Params  policy.Params
	// Engine is each worker's engine configuration: zero fields take the
	// engine's defaults, as a sim worker's flags do (KV blocks of 16
	// tokens, 16 contexts' worth of them, a 512-token step budget).
	Engine engine.Config
	// ContextLen is the simulated model's context; default 131,072
	// (`make bench`'s -sim-context). It also sizes the default KV pool:
	// 131,072 blocks of 16 tokens.
	ContextLen int
	Timing     sim.Timing // default sim.Polynomial
	// ExpectedOutputTokens is the decode length the router assumes
	// (default 256) and LoadTTL how long it holds a routed request's
	// predicted load at most (default 2 minutes): the router's flag
	// defaults. The TTL is virtual time here; a live run at make bench's
	// SPEED s holds load for s times as much trace time.
	ExpectedOutputTokens int
	LoadTTL              time.Duration
	Seed                 uint64 // seeds the router's tie-breaks
	// NoReplan plans onboarding only when a request arrives, as engines
	// did before planning it again at admission (for comparison).
	NoReplan bool
	// PullBlockTime is how long copying one KV block from a peer takes
	// (prefix pull, on when Params.PrefixPullWeight > 0: every worker
	// publishes a transfer agent). Default 84 µs: a 16-token block of
	// fp16 Llama-3-8B KV (2 MiB) at 25 GB/s.
	PullBlockTime time.Duration
	// Tiers are each worker's KV tiers below its pool, fastest first
	// (tiers.go); none by default.
	Tiers []TierConfig
	// FixedTierWeights keeps Params.Weights for the router's credit of
	// lower-tier blocks; by default, with Tiers, each tier's weight is
	// derived from its BlockTime against the time to recompute a block
	// (policy.DeriveTierWeights), as the live router derives each
	// worker's from the load times it publishes (route.DerivedCredit).
	FixedTierWeights bool
}

func (c *Config) withDefaults() error {
	switch {
	case c.Workers < 0:
		return fmt.Errorf("routesim: %d workers: want at least 1", c.Workers)
	case c.ContextLen < 0:
		return fmt.Errorf("routesim: context of %d tokens: want at least 1", c.ContextLen)
	case c.ExpectedOutputTokens < 0:
		return fmt.Errorf("routesim: expected output of %d tokens: want 0 (the default) or more", c.ExpectedOutputTokens)
	case c.LoadTTL < 0:
		return fmt.Errorf("routesim: load TTL %v: want positive", c.LoadTTL)
	case c.PullBlockTime < 0:
		return fmt.Errorf("routesim: pull block time %v: want 0 (the default) or more", c.PullBlockTime)
	}
	for _, t := range c.Tiers {
		if t.Tier == kvtier.Device || !t.Tier.Valid() || t.Blocks <= 0 || t.BlockTime < 0 {
			return fmt.Errorf("routesim: tier %+v: want a lower tier, positive capacity and a load time", t)
		}
	}
	if c.PullBlockTime == 0 {
		c.PullBlockTime = 84 * time.Microsecond
	}
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.ContextLen == 0 {
		c.ContextLen = 131072
	}
	if c.ExpectedOutputTokens == 0 {
		c.ExpectedOutputTokens = 256
	}
	if c.LoadTTL == 0 {
		c.LoadTTL = 2 * time.Minute
	}
	if c.Mode == "" {
		c.Mode = policy.ModeKV
	}
	if c.Params == (policy.Params{}) {
		c.Params = policy.DefaultParams()
	}
	if c.Timing == nil {
		c.Timing = sim.Polynomial{}
	}
	return nil
}

// Request is one request of the replay.
type Request struct {
	At     time.Duration // arrival, from the start of the replay
	Prompt []uint32
	Output int // tokens to generate; at least 1 is
}

// Errors Run returns.
var (
	// ErrOutOfOrder: the requests did not come in arrival order.
	ErrOutOfOrder = errors.New("routesim: requests are not in arrival order")
	// ErrStalled: a worker kept requests it could not schedule.
	ErrStalled = errors.New("routesim: a worker stalled")
)

const model = "sim"

// Run replays reqs (in arrival order) and returns each request's outcome.
// It stops early, with ctx's error, when ctx ends.
func Run(ctx context.Context, cfg Config, reqs iter.Seq[Request]) (*Result, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	s, err := newReplay(cfg)
	if err != nil {
		return nil, err
	}
	return s.runAll(ctx, reqs)
}

// runAll replays reqs through s to the end.
func (s *replay) runAll(ctx context.Context, reqs iter.Seq[Request]) (*Result, error) {
	next, stop := iter.Pull(reqs)
	defer stop()
	s.pull = next
	if err := s.loadNext(); err != nil {
		return nil, err
	}
	for n := 0; s.events.Len() > 0; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ev := heap.Pop(&s.events).(event)
		s.now = ev.at
		if ev.land != nil {
			if err := s.land(ev.land); err != nil {
				return nil, err
			}
			continue
		}
		if ev.worker < 0 {
			if err := s.arrive(ctx); err != nil {
				return nil, err
			}
			if err := s.loadNext(); err != nil {
				return nil, err
			}
			continue
		}
		if err := s.finishStep(ctx, ev.worker); err != nil {
			return nil, err
		}
	}
	for _, w := range s.workers {
		s.res.Preemptions += w.sched.Stats().Preemptions
		if n := len(w.reqs); n > 0 {
			// The worker had work and planned none, with no arrival left
			// to wake it: an engine would wait forever too. Say so rather
			// than report a replay that lost requests.
			return nil, fmt.Errorf("%w: %s kept %d requests it could not schedule", ErrStalled, w.name, n)
		}
	}
	return &s.res, nil
}

// replay is one run's state.
type replay struct {
	cfg     Config
	router  *route.Router
	index   *radix.Index
	workers []*worker
	pos     map[string]int // worker name → index in workers
	// sharedHolder is the index holder of the shared tier (none: "").
	sharedHolder string
	events       eventQueue
	now          time.Duration
	epoch        time.Time
	pull         func() (Request, bool)
	pending      *Request // the next arrival, not yet routed
	res          Result
	revs         []radix.Event // scratch
	// recompute is the time to prefill one block, which a tier's load
	// time must beat (tiers.go).
	recompute   time.Duration
	batchTokens int // a worker step's token budget
}

type worker struct {
	name   string
	kv     *kvcache.Manager
	sched  *sched.Scheduler
	maxLen int         // a sequence ends at this many tokens
	plan   *sched.Plan // the step in flight, nil when idle
	reqs   map[uint64]*inflight
	tiers  []*simTier
}

type inflight struct {
	i         int // index in Result.Requests
	id        string
	arrived   time.Duration
	generated int
	output    int
	started   bool // a step has computed some of it
}

func newReplay(cfg Config) (*replay, error) {
	s := &replay{cfg: cfg, index: radix.New(), epoch: time.Unix(0, 0), pos: map[string]int{}}
	shared := map[int]*simTier{}
	for j, t := range cfg.Tiers {
		if t.Shared {
			shared[j] = newSimTier(t)
		}
	}

	insts := make([]discovery.Instance, cfg.Workers)
	for i := range cfg.Workers {
		name := "sim-" + strconv.Itoa(i)
		core, err := engine.NewCore(cfg.Engine, executor.Model{Name: model, ContextLen: cfg.ContextLen})
		if err != nil {
			return nil, fmt.Errorf("routesim: %w", err)
		}
		if err := s.index.AddWorker(name); err != nil {
			return nil, fmt.Errorf("routesim: %w", err)
		}
		s.pos[name] = i
		s.batchTokens = core.Config.MaxBatchTokens
		w := &worker{name: name, kv: core.KV, sched: core.Sched, maxLen: core.MaxLen, reqs: map[uint64]*inflight{}}
		for j, t := range cfg.Tiers {
			if t.Shared {
				w.tiers = append(w.tiers, shared[j])
			} else {
				w.tiers = append(w.tiers, newSimTier(t))
			}
		}
		if len(w.tiers) > 0 {
			core.KV.TrackCommitted()
			if !cfg.NoReplan {
				wi := i
				w.sched.SetAdmitHook(func(q *sched.Seq, _ int) <-chan struct{} { return s.onboard(q, wi) })
			}
		}
		s.workers = append(s.workers, w)
		insts[i] = discovery.Instance{ID: name, Role: discovery.RoleDecode, Model: model,
			Meta: map[string]string{discovery.MetaBlockSize: strconv.Itoa(core.Config.BlockSize)}}
		for _, t := range cfg.Tiers {
			if t.Shared {
				insts[i].Meta[discovery.MetaKVSharedBlocks] = strconv.Itoa(t.Blocks)
			}
		}
		if cfg.Params.PrefixPullWeight > 0 {
			insts[i].Meta[discovery.MetaKVTransfer] = name
			insts[i].Meta[discovery.MetaPrefixPull] = "1"
		}
	}
	if len(shared) > 0 {
		s.sharedHolder = route.SharedHolder(model, s.workers[0].kv.BlockSize())
		if err := s.index.AddWorker(s.sharedHolder); err != nil {
			return nil, fmt.Errorf("routesim: %w", err)
		}
	}
	s.recompute = s.recomputeBlockTime()
	params := cfg.Params
	if len(cfg.Tiers) > 0 && !cfg.FixedTierWeights {
		var load [kvtier.Count]time.Duration
		for _, t := range cfg.Tiers {
			load[t.Tier] = t.BlockTime
		}
		params.Weights = policy.DeriveTierWeights(load, s.recompute, params.Weights)
	}
	// Every request reports its first token (PrefillDone), so the
	// router's prefill-time estimate is never used and needs no setting.
	r, err := route.New(route.Config{Self: "routesim", Index: s.index, Params: params, Mode: cfg.Mode,
		DefaultBlockSize: s.workers[0].kv.BlockSize(), ExpectedOutputTokens: cfg.ExpectedOutputTokens,
		LoadTTL: cfg.LoadTTL, Approx: "off",
		Now:    func() time.Time { return s.epoch.Add(s.now) },
		Source: rand.NewPCG(cfg.Seed, 0x5eed)})
	if err != nil {
		return nil, fmt.Errorf("routesim: %w", err)
	}
	r.SetWorkers(insts, nil)
	s.router = r
	return s, nil
}

// loadNext queues the next request's arrival, if any.
func (s *replay) loadNext() error {
	q, ok := s.pull()
	if !ok {
		s.pending = nil
		return nil
	}
	i := len(s.res.Requests)
	if q.At < s.now {
		return fmt.Errorf("%w: request %d arrives at %v, before the previous one (%v)", ErrOutOfOrder, i, q.At, s.now)
	}
	if len(q.Prompt) == 0 {
		return fmt.Errorf("routesim: request %d has an empty prompt", i)
	}
	s.pending = &q
	heap.Push(&s.events, event{at: q.At, worker: -1})
	return nil
}

// arrive routes the pending request and queues it on its worker, which
// refuses a prompt it could never hold (as an engine's Submit does).
func (s *replay) arrive(ctx context.Context) error {
	q := s.pending
	i := len(s.res.Requests)
	id := "req-" + strconv.Itoa(i)
	s.router.Loads().Expire(s.epoch.Add(s.now))
	res, err := s.router.Decide(ctx, &routerv1.RouteRequest{Model: model, TokenIds: q.Prompt, RequestId: id,
		ReportsPrefillDone: true, OmitCandidates: true})
	if err != nil {
		return fmt.Errorf("routesim: request %d: %w", i, err)
	}
	wi, ok := s.pos[res.GetDecode().GetInstanceId()]
	if !ok {
		return fmt.Errorf("routesim: request %d routed to unknown worker %q", i, res.GetDecode().GetInstanceId())
	}
	s.res.Requests = append(s.res.Requests, Outcome{Worker: wi, TTFT: -1, PromptTokens: len(q.Prompt)})
	w := s.workers[wi]
	if len(q.Prompt) >= w.maxLen {
		s.res.Failed++
		s.release(id)
		return nil
	}
	seq := &sched.Seq{ID: uint64(i) + 1, Tokens: q.Prompt, PromptLen: len(q.Prompt)}
	w.reqs[seq.ID] = &inflight{i: i, id: id, arrived: s.now, output: max(q.Output, 1)}
	if src := res.GetPrefixSource(); src != nil {
		if err := s.startPull(seq, wi, src.GetInstanceId(), int(res.GetPrefixSourceBlocks())); err != nil {
			return fmt.Errorf("routesim: request %d: %w", i, err)
		}
	}
	if seq.Ready == nil { // no pull: load what the worker's own tiers hold
		if ready := s.onboard(seq, wi); ready != nil {
			seq.Ready = ready
		}
	}
	w.sched.Add(seq)
	return s.startStep(wi)
}

// startStep plans worker wi's next step if it is idle and has work. Like
// the engine's loop, it plans again when a plan only changed the state
// (preempted or failed sequences, no work) and waits for the next arrival
// when there is nothing to do.
func (s *replay) startStep(wi int) error {
	w := s.workers[wi]
	if w.plan != nil {
		return nil
	}
	for w.sched.Waiting()+w.sched.Running() > 0 {
		p := w.sched.Schedule()
		for _, q := range p.Failed {
			s.res.Failed++
			s.release(w.reqs[q.ID].id)
			delete(w.reqs, q.ID)
		}
		if len(p.Items) > 0 {
			for _, it := range p.Items {
				if it.Start >= it.Seq.PromptLen { // a decode: it started long ago
					continue
				}
				if f := w.reqs[it.Seq.ID]; !f.started {
					f.started = true
					s.res.Requests[f.i].Queue = s.now - f.arrived
				}
			}
			var b executor.Batch
			engine.StepStats(&b, p, w.kv)
			w.plan = p
			heap.Push(&s.events, event{at: s.now + s.cfg.Timing.StepTime(&b), worker: wi})
			return nil
		}
		if len(p.Preempted) == 0 && len(p.Failed) == 0 {
			return nil
		}
	}
	return nil
}

// finishStep completes worker wi's step as the engine does: tokens are
// sampled, the step's KV events go to the router's index, the router hears
// of first tokens, and requests that reach their length leave.
func (s *replay) finishStep(ctx context.Context, wi int) error {
	w := s.workers[wi]
	p := w.plan
	w.plan = nil
	sampled := make([]uint32, len(p.Items))
	for i, it := range p.Items {
		// A pseudo-random ordinary token per (request, position), so
		// generated blocks never collide across requests.
		sampled[i] = 300 + uint32(mooncake.Mix64(it.Seq.ID<<32^uint64(it.End)+0x9e3779b97f4a7c15)%30000)
	}
	w.sched.Complete(p, sampled)
	if err := s.applyEvents(w); err != nil {
		return err
	}
	for _, it := range p.Items {
		if !it.Sample || !it.Seq.Running() {
			continue
		}
		f := w.reqs[it.Seq.ID]
		f.generated++
		if f.generated == 1 {
			o := &s.res.Requests[f.i]
			o.TTFT, o.CachedTokens = s.now-f.arrived, it.Seq.CachedPromptTokens()
			if _, err := s.router.PrefillDone(ctx, connect.NewRequest(&routerv1.PrefillDoneRequest{RequestId: f.id})); err != nil {
				return fmt.Errorf("routesim: %w", err)
			}
		}
		if f.generated >= f.output || len(it.Seq.Tokens) >= w.maxLen {
			w.sched.Finish(it.Seq)
			delete(w.reqs, it.Seq.ID)
			s.release(f.id)
			s.res.End = s.now
		}
	}
	if err := s.offload(w); err != nil {
		return err
	}
	return s.startStep(wi)
}

func (s *replay) release(id string) {
	// Release only fails on an empty id, which this package never sends.
	_, _ = s.router.Release(context.Background(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: id}))
}

// applyEvents moves worker w's KV events into the router's index, at the
// end of a step as the engine publishes them.
func (s *replay) applyEvents(w *worker) error {
	evs := w.kv.TakeEvents()
	if len(evs) == 0 {
		return nil
	}
	s.revs = s.revs[:0]
	for _, e := range evs {
		switch e.Kind {
		case kvevent.Stored:
			s.revs = append(s.revs, radix.Event{Kind: radix.Stored, Tier: e.Tier, Hashes: e.BlockHashes,
				Parent: e.ParentHash, HasParent: e.ParentHash != kvhash.Root})
		case kvevent.Removed:
			s.revs = append(s.revs, radix.RemovedEvent(e.Tier, e.BlockHashes...))
		case kvevent.Cleared:
			s.revs = append(s.revs, radix.ClearedEvent())
		}
	}
	if err := s.index.Apply(w.name, s.revs...); err != nil {
		return fmt.Errorf("routesim: worker %s events: %w", w.name, err)
	}
	return nil
}
