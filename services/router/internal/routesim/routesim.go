// Package routesim replays a request trace through simulated workers on a
// virtual clock, routed by the router's own decision code.
//
// A live replay (`make bench`: loadtest, frontend, router and eight sim
// workers as processes) takes half an hour for a whole Mooncake trace on a
// small machine, its numbers move with the host's CPU contention, and so a
// routing idea costs an afternoon to judge. Here the same parts run in one
// goroutine: route.Router decides (radix index, predicted load, policy
// profile, exactly as the service), each worker is the engine's scheduler
// and block manager (libs/engine/sched and kvcache, as the sim workers run
// them) stepped by the sim's timing model, and every step's KV events go
// into the router's index as they happen. Time is virtual, so a whole
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
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/policy"
	"switchyard.dev/services/router/internal/route"
)

// Config describes the simulated fleet and the router in front of it. Zero
// fields take the defaults of the live services (a sim worker's flags and
// the router's).
type Config struct {
	Workers int    // default 8
	Mode    string // router mode; default policy.ModeKV
	Params  policy.Params
	// Worker engine settings: KV blocks of BlockSize tokens (default
	// 131,072 of 16), the step's token budget (512), the running cap (64,
	// at most the budget), the free-block watermark (1%), the prefill
	// order (sched.OrderFCFS) and the per-prompt chunk cap under
	// contention (0, off): the sim workers' flags of the same names.
	NumBlocks         int
	BlockSize         int
	MaxBatchTokens    int
	MaxRunning        int
	WatermarkFraction float64
	PrefillOrder      string
	LongPrefillTokens int
	Timing            sim.Timing // default sim.Polynomial
	// ExpectedOutputTokens is the decode length the router assumes
	// (default 256, the router's flag default); LoadTTL ends a routed
	// request's predicted load if it never finishes (default 10 minutes of
	// virtual time).
	ExpectedOutputTokens int
	LoadTTL              time.Duration
	Seed                 uint64 // seeds the router's tie-breaks
}

func (c *Config) withDefaults() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Workers, 8)
	def(&c.NumBlocks, 131072)
	def(&c.BlockSize, 16)
	def(&c.MaxBatchTokens, 512)
	def(&c.MaxRunning, 64)
	def(&c.ExpectedOutputTokens, 256)
	if c.Mode == "" {
		c.Mode = policy.ModeKV
	}
	if c.Params == (policy.Params{}) {
		c.Params = policy.DefaultParams()
	}
	if c.WatermarkFraction == 0 {
		c.WatermarkFraction = 0.01
	}
	if c.Timing == nil {
		c.Timing = sim.Polynomial{}
	}
	if c.LoadTTL == 0 {
		c.LoadTTL = 10 * time.Minute
	}
	c.MaxRunning = min(c.MaxRunning, c.MaxBatchTokens)
	switch {
	case c.Workers < 0 || c.NumBlocks < 0 || c.BlockSize < 0 || c.MaxBatchTokens < 0 || c.MaxRunning < 0 ||
		c.LongPrefillTokens < 0 || c.ExpectedOutputTokens < 0:
		return fmt.Errorf("routesim: negative setting in %+v", *c)
	case c.WatermarkFraction < 0 || c.WatermarkFraction >= 1:
		return fmt.Errorf("routesim: watermark fraction %v: want [0, 1)", c.WatermarkFraction)
	case c.LoadTTL < 0:
		return fmt.Errorf("routesim: load TTL %v: want positive", c.LoadTTL)
	}
	return sched.CheckOrder(c.PrefillOrder)
}

// Request is one request of the replay.
type Request struct {
	At     time.Duration // arrival, from the start of the replay
	Prompt []uint32
	Output int // tokens to generate; at least 1 is
}

// Outcome is what became of one request.
type Outcome struct {
	Worker int           // index of the worker that served it
	TTFT   time.Duration // arrival to first token; -1 if it failed
	// PromptTokens and CachedTokens are the prompt and the part of it the
	// worker found in its prefix cache at admission.
	PromptTokens, CachedTokens int
}

// Result is a replay's outcome, request by request in arrival order.
type Result struct {
	Requests []Outcome
	// Failed counts requests no worker could ever fit (their prompt needs
	// more blocks than a worker has); Preemptions the sequences the
	// workers preempted for blocks.
	Failed, Preemptions int
	End                 time.Duration // when the last request finished
}

// HitRatio is the fraction of prompt tokens served from a prefix cache.
func (r *Result) HitRatio() float64 {
	var prompt, cached int
	for _, o := range r.Requests {
		prompt += o.PromptTokens
		cached += o.CachedTokens
	}
	if prompt == 0 {
		return 0
	}
	return float64(cached) / float64(prompt)
}

// TTFTs returns the first-token times of the requests that did not fail,
// sorted.
func (r *Result) TTFTs() []time.Duration {
	out := make([]time.Duration, 0, len(r.Requests))
	for _, o := range r.Requests {
		if o.TTFT >= 0 {
			out = append(out, o.TTFT)
		}
	}
	slices.Sort(out)
	return out
}

// MeanTTFT is the mean first-token time of the requests that did not fail.
func (r *Result) MeanTTFT() time.Duration {
	ts := r.TTFTs()
	if len(ts) == 0 {
		return 0
	}
	var sum time.Duration
	for _, t := range ts {
		sum += t
	}
	return sum / time.Duration(len(ts))
}

// Quantile returns the q-quantile (0..1, nearest rank) of sorted ts.
func Quantile(ts []time.Duration, q float64) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	i := int(q*float64(len(ts))+0.5) - 1
	return ts[min(max(i, 0), len(ts)-1)]
}

// ErrOutOfOrder: the requests did not arrive in time order.
var ErrOutOfOrder = errors.New("routesim: requests are not in arrival order")

// ErrStalled: a worker kept requests it could not schedule.
var ErrStalled = errors.New("routesim: a worker stalled")

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
	stuck := 0
	for _, w := range s.workers {
		s.res.Preemptions += w.sched.Stats().Preemptions
		stuck += len(w.reqs)
	}
	if stuck > 0 {
		// A worker had work and planned none, with no arrival left to wake
		// it: the engine would wait forever too. Say so rather than report
		// a replay that lost requests.
		return nil, fmt.Errorf("%w: %d requests never finished", ErrStalled, stuck)
	}
	return &s.res, nil
}

// replay is one run's state.
type replay struct {
	cfg     Config
	router  *route.Router
	index   *radix.Index
	workers []*worker
	events  eventQueue
	now     time.Duration
	epoch   time.Time
	pull    func() (Request, bool)
	pending *Request // the next arrival, not yet routed
	res     Result
	revs    []radix.Event // scratch
}

type worker struct {
	name  string
	kv    *kvcache.Manager
	sched *sched.Scheduler
	plan  *sched.Plan // the step in flight, nil when idle
	reqs  map[uint64]*inflight
}

type inflight struct {
	i         int // index in Result.Requests
	id        string
	arrived   time.Duration
	generated int
	output    int
}

func newReplay(cfg Config) (*replay, error) {
	s := &replay{cfg: cfg, index: radix.New(), epoch: time.Unix(0, 0)}
	insts := make([]discovery.Instance, cfg.Workers)
	for i := range cfg.Workers {
		name := "sim-" + strconv.Itoa(i)
		kv, err := kvcache.New(kvcache.Config{NumBlocks: cfg.NumBlocks, BlockSize: cfg.BlockSize})
		if err != nil {
			return nil, fmt.Errorf("routesim: %w", err)
		}
		sc, err := sched.New(sched.Config{MaxBatchTokens: cfg.MaxBatchTokens, MaxRunning: cfg.MaxRunning,
			WatermarkBlocks: int(cfg.WatermarkFraction*float64(cfg.NumBlocks) + 0.5), Order: cfg.PrefillOrder,
			LongPrefillTokens: cfg.LongPrefillTokens}, kv)
		if err != nil {
			return nil, fmt.Errorf("routesim: %w", err)
		}
		if err := s.index.AddWorker(name); err != nil {
			return nil, fmt.Errorf("routesim: %w", err)
		}
		s.workers = append(s.workers, &worker{name: name, kv: kv, sched: sc, reqs: map[uint64]*inflight{}})
		insts[i] = discovery.Instance{ID: name, Role: discovery.RoleDecode, Model: model,
			Meta: map[string]string{discovery.MetaBlockSize: strconv.Itoa(cfg.BlockSize)}}
	}
	r, err := route.New(route.Config{Self: "routesim", Index: s.index, Params: cfg.Params, Mode: cfg.Mode,
		DefaultBlockSize: cfg.BlockSize, ExpectedOutputTokens: cfg.ExpectedOutputTokens,
		PrefillBlockTime: time.Millisecond, LoadTTL: cfg.LoadTTL, Approx: "off",
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
	if q.At < s.now {
		return fmt.Errorf("%w: request %d at %v after one at %v", ErrOutOfOrder, len(s.res.Requests), q.At, s.now)
	}
	if len(q.Prompt) == 0 {
		return fmt.Errorf("routesim: request %d has an empty prompt", len(s.res.Requests))
	}
	s.pending = &q
	heap.Push(&s.events, event{at: q.At, worker: -1, order: len(s.res.Requests)})
	return nil
}

// arrive routes the pending request and queues it on its worker.
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
	wi := slices.IndexFunc(s.workers, func(w *worker) bool { return w.name == res.GetDecode().GetInstanceId() })
	if wi < 0 {
		return fmt.Errorf("routesim: request %d routed to unknown worker %q", i, res.GetDecode().GetInstanceId())
	}
	s.res.Requests = append(s.res.Requests, Outcome{Worker: wi, TTFT: -1, PromptTokens: len(q.Prompt)})
	w := s.workers[wi]
	seq := &sched.Seq{ID: uint64(i) + 1, Tokens: q.Prompt, PromptLen: len(q.Prompt)}
	seq.BlockHashes(s.cfg.BlockSize)
	w.reqs[seq.ID] = &inflight{i: i, id: id, arrived: s.now, output: max(q.Output, 1)}
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
		if err := s.applyEvents(w); err != nil {
			return err
		}
		for _, q := range p.Failed {
			f := w.reqs[q.ID]
			delete(w.reqs, q.ID)
			s.res.Failed++
			s.release(f.id)
		}
		if len(p.Items) > 0 {
			b := executorBatch(p, w.kv)
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

// finishStep completes worker wi's step: tokens are sampled, finished
// requests leave, the router hears of first tokens and releases.
func (s *replay) finishStep(ctx context.Context, wi int) error {
	w := s.workers[wi]
	p := w.plan
	w.plan = nil
	sampled := make([]uint32, len(p.Items))
	for i, it := range p.Items {
		// A pseudo-random ordinary token per (request, position), so
		// generated blocks never collide across requests.
		sampled[i] = 300 + uint32(mix(it.Seq.ID<<32^uint64(it.End))%30000)
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
		if f.generated >= f.output {
			w.sched.Finish(it.Seq)
			delete(w.reqs, it.Seq.ID)
			s.release(f.id)
			s.res.End = s.now
		}
	}
	return s.startStep(wi)
}

// executorBatch is what a timing model reads of p's step: token counts and
// KV occupancy (the engine fills the same fields).
func executorBatch(p *sched.Plan, kv *kvcache.Manager) executor.Batch {
	return executor.Batch{PrefillTokens: p.PrefillTokens, DecodeTokens: p.DecodeTokens,
		UsedBlocks: kv.Used(), TotalBlocks: kv.NumBlocks()}
}

func (s *replay) release(id string) {
	// Release only fails on an empty id, which this package never sends.
	_, _ = s.router.Release(context.Background(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: id}))
}

// applyEvents moves worker w's KV events into the router's index, as its
// event stream would.
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

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// event is an arrival (worker -1) or the end of a worker's step.
type event struct {
	at     time.Duration
	worker int
	order  int // arrivals: the request's index, so equal times keep input order
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }

// Less orders by time; at equal times steps end before requests arrive
// (a worker that finishes a step at the arrival instant has already
// reported it), then workers by index and arrivals by input order.
func (q eventQueue) Less(a, b int) bool {
	x, y := q[a], q[b]
	if x.at != y.at {
		return x.at < y.at
	}
	if (x.worker < 0) != (y.worker < 0) {
		return x.worker >= 0
	}
	if x.worker != y.worker {
		return x.worker < y.worker
	}
	return x.order < y.order
}
func (q eventQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
