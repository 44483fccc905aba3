// Package handler serves switchyard.worker.v1.WorkerService over an engine
// (the built-in one, or any behind package engines' seam):
// it turns RPCs into engine requests, engine outputs and KV events into
// stream messages, and engine errors into precise Connect codes.
//
// The wire contract is the caller's only view of the worker, so the error
// codes are part of it:
//   - InvalidArgument: the engine rejected the request (its message says
//     which field and value), or model was empty.
//   - NotFound: the request names a model this worker does not serve.
//   - ResourceExhausted: the request can never fit in the KV cache.
//   - Unavailable: the worker is draining or stopped, or its engine is
//     down; retry elsewhere.
//   - Unimplemented: SubscribeKvEvents on an engine that publishes no KV
//     events (the router then approximates), RemotePrefill and
//     ExportPrefix without a transfer agent.
//   - OutOfRange: SubscribeKvEvents asked to resume at a sequence number
//     that is no longer buffered (or was never issued, as after a restart).
//     The subscriber must resubscribe with dump=true. OutOfRange rather
//     than FailedPrecondition because retrying with a different position
//     (the dump's) fixes it, the way a reader seeking past a log's
//     retention does.
//
// A Handler is safe for concurrent use. Drain is the shutdown hook: new
// generations are refused, KV event streams end, and in-flight generations
// run to completion while the engine loop keeps going.
package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/worker/engines"
)

// Engine is what the handler needs from the built-in engine
// (*engine.Engine); New drives it through Backend like any other.
type Engine interface {
	Validate(r engine.Request) error
	Submit(ctx context.Context, r engine.Request) (*engine.Stream, error)
	Subscribe(after uint64) *kvevent.Subscription
	Dump() kvevent.Batch
	EventSeq() uint64
	Metrics() engine.Metrics
	ModelInfo() engine.ModelInfo
	ClearPrefixCache()
}

// Backend is what the handler needs from any engine (package engines): the
// built-in one or an adapter of a third-party server. A nil KV means the
// engine publishes no KV events: SubscribeKvEvents answers Unimplemented
// and the router approximates the worker's cache from its own decisions.
type Backend interface {
	Validate(r engine.Request) error
	Generate(ctx context.Context, r engine.Request) (engines.Stream, error)
	Metrics() engine.Metrics
	ModelInfo() engine.ModelInfo
	KV() engines.KVEvents
}

// Config configures a Handler.
type Config struct {
	// Engine is the built-in engine; Backend, when set, is served instead.
	Engine Engine
	// Backend is any engine behind the seam (engines.Engine).
	Backend Backend
	// Model is the served model name that requests must name.
	Model string
	// Tokenizer is the tokenizer in the format TokenizerKind names
	// ("llama2c": a tokenizer.bin file; "bytes": nil, a byte-level
	// tokenizer; "vocab": a tokenizer.Vocab as JSON), as GetModelInfo
	// ships it to frontends.
	Tokenizer     []byte
	TokenizerKind string
	// ChatTemplate is the model's own chat template (Jinja), "" for none.
	ChatTemplate string
	Logger       *slog.Logger
	// Disagg, when set, may have a prefill worker prefill a Generate
	// request's prompt (package disagg's Decoder).
	Disagg Disagg
	// Exporter, when set, serves RemotePrefill and ExportPrefix (package
	// disagg's Exporter); without it both are Unimplemented.
	Exporter Exporter
	// Cordon publishes the worker's cordon (discovery.MetaCordoned) for
	// SetCordon; nil answers Unimplemented.
	Cordon func(ctx context.Context, cordoned bool) error
	// Phases, when set, are the TTFT phase sums GetLoad reports.
	Phases func() *workerv1.TtftPhases
}

// Disagg is the importing side of disaggregated prefill and prefix pull.
// Prepare runs before r is submitted and may import KV (and set
// r.FirstToken) from the prefill worker or the prefix holder the request
// names; submitted is called once the engine took r, and first exactly
// once, with the first output or nil.
type Disagg interface {
	Prepare(ctx context.Context, r *engine.Request, prefillWorker, prefixWorker string, prefixBlocks int) (submitted func(), first func(*engine.Output))
}

// Exporter is the exporting side: RemotePrefill and ExportPrefix. Its
// errors are Connect errors.
type Exporter interface {
	Prefill(ctx context.Context, m *workerv1.RemotePrefillRequest) (*workerv1.RemotePrefillResponse, error)
	ExportPrefix(ctx context.Context, m *workerv1.ExportPrefixRequest) (*workerv1.ExportPrefixResponse, error)
}

// Handler implements workerv1connect.WorkerServiceHandler.
type Handler struct {
	eng   Backend
	model string
	info  *workerv1.GetModelInfoResponse
	log   *slog.Logger
	dis   Disagg
	exp   Exporter
	cord  func(context.Context, bool) error
	phase func() *workerv1.TtftPhases
	// cordMu orders SetCordon calls, so the published state is the last
	// call's; cordoned is that state.
	cordMu   sync.Mutex
	cordoned bool
	// noWait is a cancelled context: Recv with it takes only queued outputs.
	noWait context.Context

	// pendingPrefill counts prompt tokens of requests that have not yet
	// produced their first output.
	pendingPrefill atomic.Int64

	stopOnce sync.Once
	stopped  chan struct{} // closed by Drain: ends KV event streams

	mu       sync.Mutex
	inflight int
	draining bool
	idle     chan struct{} // closed when inflight reaches 0 while draining
}

var _ workerv1connect.WorkerServiceHandler = (*Handler)(nil)

// New returns a handler for cfg.Engine.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	eng := cfg.Backend
	if eng == nil {
		eng = builtin{cfg.Engine}
	}
	mi := eng.ModelInfo()
	noWait, cancel := context.WithCancel(context.Background())
	cancel()
	return &Handler{
		eng: eng, model: cfg.Model, log: cfg.Logger, dis: cfg.Disagg, exp: cfg.Exporter, cord: cfg.Cordon, phase: cfg.Phases, stopped: make(chan struct{}), noWait: noWait,
		info: &workerv1.GetModelInfoResponse{
			Model: cfg.Model, VocabSize: u32(mi.VocabSize), ContextLength: u32(mi.ContextLen),
			BlockSize: u32(mi.BlockSize), BosTokenId: mi.BOS, EosTokenId: mi.EOS,
			Tokenizer: cfg.Tokenizer, TokenizerKind: cfg.TokenizerKind, ChatTemplate: cfg.ChatTemplate,
		},
	}
}

// GetLoad implements WorkerServiceHandler.
func (h *Handler) GetLoad(context.Context, *connect.Request[workerv1.GetLoadRequest]) (*connect.Response[workerv1.GetLoadResponse], error) {
	m := h.eng.Metrics()
	resp := &workerv1.GetLoadResponse{
		RunningRequests:      u32(m.Running),
		WaitingRequests:      u32(m.Waiting),
		KvBlocksUsed:         u32(m.KVUsedBlocks),
		KvBlocksTotal:        u32(m.KVTotalBlocks),
		PendingPrefillTokens: u32(int(max(h.pendingPrefill.Load(), 0))),
	}
	for _, t := range m.Tiers {
		resp.KvTiers = append(resp.KvTiers, &workerv1.KvTierLoad{Tier: t.Tier.String(), BlocksUsed: u32(t.Blocks), BlocksCapacity: u32(t.Capacity)})
	}
	if h.phase != nil {
		resp.TtftPhases = h.phase()
	}
	return connect.NewResponse(resp), nil
}

// prefixClearer is an engine that can drop its cached prefixes.
type prefixClearer interface{ ClearPrefixCache() }

// SetCordon implements WorkerServiceHandler.
func (h *Handler) SetCordon(ctx context.Context, req *connect.Request[workerv1.SetCordonRequest]) (*connect.Response[workerv1.SetCordonResponse], error) {
	if h.cord == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this worker cannot be cordoned (no discovery)"))
	}
	h.cordMu.Lock()
	defer h.cordMu.Unlock()
	on := req.Msg.GetCordoned()
	if err := h.cord(ctx, on); err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("publish cordon: %w", err))
	}
	h.cordoned = on
	h.log.InfoContext(ctx, "cordon", "cordoned", on)
	h.mu.Lock()
	running := h.inflight
	h.mu.Unlock()
	return connect.NewResponse(&workerv1.SetCordonResponse{Cordoned: on, RunningRequests: u32(running)}), nil
}

// ClearPrefixCache implements WorkerServiceHandler.
func (h *Handler) ClearPrefixCache(context.Context, *connect.Request[workerv1.ClearPrefixCacheRequest]) (*connect.Response[workerv1.ClearPrefixCacheResponse], error) {
	c, ok := h.eng.(prefixClearer)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this worker's engine cannot clear its prefix cache"))
	}
	before := h.eng.Metrics().KVUsedBlocks
	c.ClearPrefixCache()
	after := h.eng.Metrics().KVUsedBlocks
	h.log.Info("prefix cache cleared", "kv_blocks_used_before", before, "kv_blocks_used_after", after)
	return connect.NewResponse(&workerv1.ClearPrefixCacheResponse{KvBlocksUsedBefore: u32(before), KvBlocksUsedAfter: u32(after)}), nil
}

// GetModelInfo implements WorkerServiceHandler. The response is shared and
// must not be modified.
func (h *Handler) GetModelInfo(context.Context, *connect.Request[workerv1.GetModelInfoRequest]) (*connect.Response[workerv1.GetModelInfoResponse], error) {
	return connect.NewResponse(h.info), nil
}

// Drain refuses new generations (Unavailable), ends KV event streams, and
// waits until in-flight generations finish or ctx ends.
func (h *Handler) Drain(ctx context.Context) error {
	h.stopOnce.Do(func() { close(h.stopped) })
	h.mu.Lock()
	h.draining = true
	if h.inflight == 0 {
		h.mu.Unlock()
		return nil
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	idle := h.idle
	h.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Inflight is the number of Generate calls in progress.
func (h *Handler) Inflight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inflight
}

func (h *Handler) begin() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining {
		return false
	}
	h.inflight++
	return true
}

func (h *Handler) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight--
	if h.inflight == 0 && h.idle != nil {
		close(h.idle)
		h.idle = nil
	}
}

// builtin drives the built-in engine as a Backend.
type builtin struct{ Engine }

func (b builtin) Generate(ctx context.Context, r engine.Request) (engines.Stream, error) {
	st, err := b.Submit(ctx, r)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (b builtin) KV() engines.KVEvents { return b.Engine }

// ClearPrefixCache clears the built-in engine's prefix cache.
func (b builtin) ClearPrefixCache() { b.Engine.ClearPrefixCache() }

func u32(n int) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}
