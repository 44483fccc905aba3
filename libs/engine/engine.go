// Package engine is Switchyard's inference engine library: it accepts
// generation requests, schedules them with continuous batching over a paged,
// prefix-cached KV store, drives an Executor (a real model or a timing
// simulation) from one loop goroutine, streams outputs, and publishes KV
// cache events for the router.
//
// Worker services construct an Executor (llama.Open, llama.NewTinyRandom or
// sim.New), call New, start Run in a goroutine, then Submit requests and
// read their Streams. Everything the loop touches is guarded by one mutex
// that the loop releases while the executor computes, so Submit, Metrics,
// Dump and cancellation never wait for a model step. See README.md for the
// design, the KV layout and the timing model.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/engine/tokenizer"
)

// Config sizes the engine. Zero fields take the defaults noted.
type Config struct {
	BlockSize int // tokens per KV block; default 16
	// NumBlocks is the KV pool size; default enough for 16 full-context
	// sequences (or KVCacheBytes / block bytes when that is set).
	NumBlocks    int
	KVCacheBytes int64
	// MaxBatchTokens is the per-step token budget; default 512. Prompts
	// longer than the remaining budget are prefilled in chunks.
	MaxBatchTokens int
	MaxRunning     int // cap on running sequences; default 64, at most MaxBatchTokens
	// LongPrefillTokens caps each prompt's chunk in a step while several
	// prompts are being prefilled, so short ones are not queued behind a
	// long one (sched.Config.LongPrefillTokens); 0 (default) disables.
	LongPrefillTokens int
	// PrefillOrder shares each step's budget among prompts:
	// sched.OrderFCFS (default) or sched.OrderShortest.
	PrefillOrder string
	// WatermarkFraction of blocks stays free after admitting a request;
	// default 0.01.
	WatermarkFraction float64
	EventBuffer       int // KV event batches kept for replay; default 1024
	// Tiers are the KV tiers below the arena, fastest first (host memory,
	// then disk; see tiers.go). None by default: an evicted block is gone.
	Tiers []TierConfig
	// SharedKV maps the KV arena as shared memory, which a transfer
	// agent's child process maps too (kvcache.Config.Shared).
	SharedKV bool
}

func (c *Config) fill(m executor.Model) error {
	if c.BlockSize < 0 || c.NumBlocks < 0 || c.KVCacheBytes < 0 || c.MaxBatchTokens < 0 || c.LongPrefillTokens < 0 ||
		c.MaxRunning < 0 || c.WatermarkFraction < 0 || c.WatermarkFraction >= 1 || c.EventBuffer < 0 {
		return fmt.Errorf("engine: invalid config %+v", *c)
	}
	if c.BlockSize == 0 {
		c.BlockSize = 16
	}
	if c.NumBlocks == 0 {
		c.NumBlocks = 16 * ((m.ContextLen + c.BlockSize - 1) / c.BlockSize)
		if bb := int64(c.BlockSize * m.KVBytesPerToken); c.KVCacheBytes > 0 && bb > 0 {
			c.NumBlocks = int(c.KVCacheBytes / bb)
		}
	}
	if c.MaxBatchTokens == 0 {
		c.MaxBatchTokens = 512
	}
	if c.MaxRunning == 0 {
		c.MaxRunning = 64
	}
	// Every running sequence needs at least one token of budget per step,
	// or the ones at the back of the queue would never advance.
	c.MaxRunning = min(c.MaxRunning, c.MaxBatchTokens)
	if c.WatermarkFraction == 0 {
		c.WatermarkFraction = 0.01
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = 1024
	}
	return nil
}

// Engine serves one model.
type Engine struct {
	cfg     Config
	exec    executor.Executor
	log     *slog.Logger
	model   executor.Model
	tok     tokenizer.Tokenizer
	maxLen  int
	journal *kvevent.Journal
	wake    chan struct{}
	running atomic.Bool
	formats formats // structured output (constraint.go), built on first use

	mu        sync.Mutex // guards everything below
	kv        *kvcache.Manager
	sched     *sched.Scheduler
	reqs      map[uint64]*request
	nextID    uint64
	cancelled []uint64
	stopped   bool
	stats     stepStats
	tiers     *tiers // nil without lower tiers
}

// New builds an engine around exec. The logger may be nil.
func New(cfg Config, exec executor.Executor, logger *slog.Logger) (*Engine, error) {
	if exec == nil {
		return nil, fmt.Errorf("engine: nil executor")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := exec.Model()
	core, err := NewCore(cfg, m)
	if err != nil {
		return nil, err
	}
	cfg, kv := core.Config, core.KV
	if err := exec.Bind(executor.KV{Arena: kv.Arena(), BlockSize: cfg.BlockSize, BlockBytes: cfg.BlockSize * m.KVBytesPerToken, NumBlocks: cfg.NumBlocks}); err != nil {
		_ = kv.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{
		cfg: cfg, exec: exec, log: logger, model: m, tok: exec.Tokenizer(),
		maxLen:  core.MaxLen,
		journal: kvevent.NewJournalAfter(cfg.EventBuffer, kvevent.RandomStart()),
		wake:    make(chan struct{}, 1),
		kv:      kv, sched: core.Sched, reqs: make(map[uint64]*request),
	}
	if err := e.openTiers(cfg.Tiers, cfg.BlockSize*m.KVBytesPerToken); err != nil {
		_ = kv.Close()
		return nil, err
	}
	// Blocks the tiers found on disk are announced with the first batch.
	e.flushEvents()
	return e, nil
}

// Core is an engine's scheduling state without its executor, goroutine or
// streams: the block manager and scheduler a Config describes, and the
// longest sequence it lets grow. New builds one; so does a simulation that
// steps the scheduler on a virtual clock (the router's routesim), which so
// schedules, evicts and preempts exactly as an engine with the same Config.
type Core struct {
	Config Config // defaults filled in
	KV     *kvcache.Manager
	Sched  *sched.Scheduler
	// MaxLen ends a sequence (FinishLength) once it holds this many
	// tokens: the model's context or the whole KV pool, whichever is less.
	MaxLen int
}

// NewCore fills cfg's defaults for model m and builds its block manager
// (with an arena when m has KVBytesPerToken) and scheduler.
func NewCore(cfg Config, m executor.Model) (*Core, error) {
	if err := cfg.fill(m); err != nil {
		return nil, err
	}
	kv, err := kvcache.New(kvcache.Config{NumBlocks: cfg.NumBlocks, BlockSize: cfg.BlockSize, BlockBytes: cfg.BlockSize * m.KVBytesPerToken, Shared: cfg.SharedKV})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	watermark := int(cfg.WatermarkFraction*float64(cfg.NumBlocks) + 0.5)
	s, err := sched.New(sched.Config{MaxBatchTokens: cfg.MaxBatchTokens, MaxRunning: cfg.MaxRunning, WatermarkBlocks: watermark, LongPrefillTokens: cfg.LongPrefillTokens, Order: cfg.PrefillOrder}, kv)
	if err != nil {
		_ = kv.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	return &Core{Config: cfg, KV: kv, Sched: s, MaxLen: min(m.ContextLen, cfg.NumBlocks*cfg.BlockSize)}, nil
}

// StepStats sets what a timing model reads of plan p's step in b: its
// token counts and the occupancy of kv, the pool it was planned from.
func StepStats(b *executor.Batch, p *sched.Plan, kv *kvcache.Manager) {
	b.PrefillTokens, b.DecodeTokens = p.PrefillTokens, p.DecodeTokens
	b.UsedBlocks, b.TotalBlocks = kv.Used(), kv.NumBlocks()
}

// Close releases the KV arena. It fails while Run is active: the executor
// may be reading the arena.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running.Load() && !e.stopped {
		return ErrStillRunning
	}
	e.stopLocked() // requests submitted to an engine that never ran end too
	if e.tiers != nil {
		// Onboarding copies into the arena: let them finish first. They
		// take the lock to commit, so wait without it.
		e.mu.Unlock()
		e.tiers.busy.Wait()
		e.mu.Lock()
		return errors.Join(e.tiers.close(), e.kv.Close())
	}
	return e.kv.Close()
}

// Config returns the effective configuration (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// Tokenizer returns the model's tokenizer.
func (e *Engine) Tokenizer() tokenizer.Tokenizer { return e.tok }

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Validate checks r as Submit will, without submitting it: for work a
// caller does before Submit (a remote prefill) that an invalid request
// must not cost.
func (e *Engine) Validate(r Request) error {
	if err := e.validate(&r); err != nil {
		return err
	}
	_, err := e.grammarFor(&r)
	return err
}

// Submit validates r and queues it. The request is cancelled when ctx is
// done or Stream.Cancel is called. Validation errors match
// ErrInvalidRequest; no KV block is touched before validation passes.
func (e *Engine) Submit(ctx context.Context, r Request) (*Stream, error) {
	if err := e.validate(&r); err != nil {
		return nil, err
	}
	c, err := e.constraintFor(&r)
	if err != nil {
		return nil, err
	}
	return e.submit(ctx, r, c)
}

// submit queues r, validated, with c (nil for free text) holding its
// output to its format.
func (e *Engine) submit(ctx context.Context, r Request, c sample.Constraint) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The request, its prompt's block hashes included, is built before
	// the lock, which the loop holds while it schedules.
	if e.tiers != nil && r.Ready == nil {
		e.onboard(ctx, &r) // may set r.Ready: the request waits in its place for its blocks
	}
	req := newRequest(e, r, c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, ErrStopped
	}
	e.nextID++
	id := e.nextID
	req.id, req.seq.ID = id, id
	st := req.stream
	st.cancel = func() { e.cancel(id) }
	req.stopCtx = context.AfterFunc(ctx, func() { e.cancel(id) })
	e.reqs[id] = req
	e.sched.Add(req.seq)
	e.signal()
	if r.Ready != nil {
		// The loop may have gone idle with only this request held: wake
		// it when the request becomes admissible.
		go func() {
			<-r.Ready
			e.signal()
		}()
	}
	return st, nil
}

func (e *Engine) cancel(id uint64) {
	e.mu.Lock()
	if _, ok := e.reqs[id]; ok {
		e.cancelled = append(e.cancelled, id)
	}
	e.mu.Unlock()
	e.signal()
}

// Run drives the engine until ctx is done, then ends every unfinished
// request with ErrStopped. It returns nil on cancellation.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	defer e.shutdown()
	if e.tiers != nil {
		octx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); e.offloader(octx) }()
		defer func() { stop(); <-done }()
	}
	var batch executor.Batch
	for ctx.Err() == nil {
		plan := e.plan()
		if len(plan.Items) == 0 {
			if len(plan.Preempted) > 0 || len(plan.Failed) > 0 {
				// The step changed the state without planning work (a
				// sequence preempted itself, freeing blocks, and admission
				// waits a step after a preemption): plan again rather than
				// wait for a wake-up that may never come.
				continue
			}
			select {
			case <-ctx.Done():
			case <-e.wake:
			}
			continue
		}
		e.fillBatch(&batch, plan)
		start := e.stats.now()
		err := e.execute(ctx, &batch)
		if ctx.Err() != nil {
			break
		}
		e.complete(plan, &batch, err, e.stats.now().Sub(start))
	}
	return nil
}

// execute runs one step. A panic in the executor (on this goroutine) is the
// step's error: its requests fail, the others and the engine go on, rather
// than one bad request ending the worker and everything it serves.
func (e *Engine) execute(ctx context.Context, b *executor.Batch) (err error) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("executor panicked; failing the step's requests", "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("executor panicked: %v", v)
		}
	}()
	return e.exec.Execute(ctx, b)
}

func (e *Engine) shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopLocked()
	e.flushEvents()
}

// stopLocked stops taking requests and ends every unfinished one with
// ErrStopped; e.mu is held.
func (e *Engine) stopLocked() {
	e.stopped = true
	for _, r := range e.reqs {
		e.finish(r, FinishError, ErrStopped, nil)
	}
}
