package disagg

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/worker/wire"
)

// Modes of -disagg.
const (
	ModeAuto = "auto" // remote prefill when a prefill worker is named and the uncached prompt is long
	ModeOff  = "off"  // always prefill locally
)

// How a request's prompt was prefilled, the "mode" attribute of the TTFT
// metrics and spans.
const (
	PathLocal    = "local"    // by choice: short prompt, no prefill worker, or -disagg=off
	PathRemote   = "remote"   // by a prefill worker, KV imported
	PathFallback = "fallback" // the remote prefill (or prefix pull) failed; prefilled locally
	PathPulled   = "pulled"   // leading blocks copied from a peer (prefix pull), the rest prefilled locally
)

// DecodeEngine is what the decode side needs from *engine.Engine.
type DecodeEngine interface {
	KV() executor.KV
	ModelInfo() engine.ModelInfo
	PinPrefix(hashes []uint64) []kvcache.Region
	AllocateForImport(n int) ([]kvcache.Region, error)
	CommitImportedAfter(parent uint64, blocks []int, tokens []uint32, salt uint64) ([]int, error)
	ReleaseBlocks(blocks []int)
	// OutputBudget is the most tokens r can generate here: what a remote
	// prefill holds a structured output's first token to.
	OutputBudget(r engine.Request) int
}

// Prefiller is what the decode side calls on a peer (a WorkerService
// client): a prefill worker's RemotePrefill, a prefix holder's
// ExportPrefix.
type Prefiller interface {
	RemotePrefill(context.Context, *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error)
	ExportPrefix(context.Context, *connect.Request[workerv1.ExportPrefixRequest]) (*connect.Response[workerv1.ExportPrefixResponse], error)
}

// Phases is one request's time to first token, split up. Phases that do
// not apply to the path are zero.
type Phases struct {
	Path        string
	Queue       time.Duration // waiting for admission (the prefill worker's when remote)
	Prefill     time.Duration // computing the prompt up to the first token
	Transfer    time.Duration // remote: KV transfer not hidden behind compute, plus the RPC; pulled: the pull's RPC
	FirstDecode time.Duration // remote: from the import to the decode engine's first output
}

// Observer records TTFT phases (package metrics implements it).
type Observer interface {
	ObserveTTFT(ctx context.Context, p Phases)
}

// DecodeConfig configures a Decoder.
type DecodeConfig struct {
	Engine DecodeEngine
	Model  string
	// Agent moves KV into the engine's arena; each remote prefill gets a
	// window of it registered for its duration (see window).
	Agent *nixl.Agent
	// Dial returns the client of the prefill worker at a base URL.
	Dial func(baseURL string) Prefiller
	// Mode is ModeAuto or ModeOff; Threshold is the uncached prompt
	// length (tokens) above which ModeAuto prefills remotely.
	Mode      string
	Threshold int
	// Timeout bounds a remote prefill (RPC and transfer); 0 means 30s.
	Timeout  time.Duration
	Observer Observer // nil records nothing
	Tracer   trace.Tracer
	Logger   *slog.Logger
}

// Decoder is the decode side. It is safe for concurrent use.
type Decoder struct {
	cfg         DecodeConfig
	vocab       int // the engine's vocabulary size: a first token must be below it
	quarantined atomic.Int64
}

// NewDecoder returns a Decoder.
func NewDecoder(cfg DecodeConfig) *Decoder {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &Decoder{cfg: cfg, vocab: cfg.Engine.ModelInfo().VocabSize}
}

// Prepare runs before r is submitted. When the prompt should be and could
// be prefilled by prefillWorker, the KV of its full blocks is imported and
// r.FirstToken set; otherwise, when prefixWorker holds more of its leading
// blocks (prefixBlocks of them, as the router saw) than this engine, those
// are copied from it (prefix pull) and the engine prefills the rest.
// Either way r may be left alone. Call submitted once the engine has taken
// r: it drops the references that kept the imported (or pinned) blocks
// from eviction. Call first exactly once, with the request's first output
// or nil when it ended without one (or was never submitted): it drops
// those references if submitted did not, and records the TTFT phases.
//
// The references go at submission, not at the first output: a request
// waiting for its tail block must not hold its prefix out of reach. Two
// imports that took every free block, each waiting for one more, would
// otherwise never be admitted. Waiting, the blocks are cached and the most
// recently used, so only a full pool evicts them, and then the request
// recomputes what it lost, with the same result.
func (d *Decoder) Prepare(ctx context.Context, r *engine.Request, prefillWorker, prefixWorker string, prefixBlocks int) (submitted func(), first func(*engine.Output)) {
	p := &prepared{d: d, ctx: ctx, path: PathLocal, start: time.Now(), id: r.ID, promptTokens: len(r.Prompt)}
	ctx, p.span = d.cfg.Tracer.Start(ctx, "disagg.prepare", trace.WithAttributes(
		attribute.Int("prompt_tokens", len(r.Prompt)), attribute.String("prefill_worker", prefillWorker),
		attribute.String("prefix_worker", prefixWorker)))
	p.ctx = ctx
	if d.cfg.Mode != ModeOff && prefillWorker != "" && d.cfg.Dial != nil {
		if err := p.remote(ctx, r, prefillWorker); err != nil {
			p.path = PathFallback
			p.span.RecordError(err)
			d.cfg.Logger.WarnContext(ctx, "remote prefill failed; prefilling locally", "request", r.ID, "prefill_worker", prefillWorker, "err", err)
		}
	}
	if d.cfg.Mode != ModeOff && p.path == PathLocal && prefixWorker != "" && d.cfg.Dial != nil {
		if err := p.pull(ctx, r, prefixWorker, prefixBlocks); err != nil {
			p.path = PathFallback
			p.span.RecordError(err)
			d.cfg.Logger.WarnContext(ctx, "prefix pull failed; prefilling locally", "request", r.ID, "prefix_worker", prefixWorker, "err", err)
		}
	}
	if p.pulling == nil { // else the pull's goroutine decides the path and ends the span
		p.endSpan()
	}
	p.submitted = time.Now()
	return p.release, p.first
}

type prepared struct {
	d            *Decoder
	ctx          context.Context
	id           string // the request's, for the debug log
	promptTokens int
	span         trace.Span
	path         string
	start        time.Time
	submitted    time.Time
	resp         *workerv1.RemotePrefillResponse
	rpc          time.Duration // the RemotePrefill (or ExportPrefix) call
	pulled       int           // blocks copied by a prefix pull
	// pulling is closed when a started prefix pull ended (it is r.Ready);
	// path, pulled and rpc are the pull's until then.
	pulling  chan struct{}
	held     []int // held (pinned or imported) until submitted
	released sync.Once
	once     sync.Once
}

func (p *prepared) endSpan() {
	p.span.SetAttributes(attribute.String("mode", p.path))
	p.span.End()
}

// release drops the references on the held blocks (once).
func (p *prepared) release() {
	p.released.Do(func() { p.d.cfg.Engine.ReleaseBlocks(p.held) })
}

func (p *prepared) first(o *engine.Output) {
	p.once.Do(func() {
		p.release()
		if p.pulling != nil {
			// At once after an output (the engine admitted r only once the
			// pull ended); bounded by the pull's timeout otherwise.
			<-p.pulling
		}
		debug := p.d.cfg.Logger.Enabled(p.ctx, slog.LevelDebug)
		if o == nil || (p.d.cfg.Observer == nil && !debug) {
			return
		}
		ph := Phases{Path: p.path, Queue: o.QueueTime}
		if p.path == PathRemote {
			ph.Queue = time.Duration(p.resp.GetQueueNanos())
			ph.Prefill = time.Duration(p.resp.GetPrefillNanos())
			ph.Transfer = max(p.rpc-ph.Queue-ph.Prefill, 0)
			ph.FirstDecode = time.Since(p.submitted)
			_, s := p.d.cfg.Tracer.Start(p.ctx, "disagg.first_decode", trace.WithTimestamp(p.submitted))
			s.End()
		} else {
			ph.Prefill = max(time.Since(p.submitted)-o.QueueTime, 0)
			if p.path == PathPulled {
				ph.Transfer = p.rpc
			}
		}
		if debug {
			// One line a request, to line a live run up against a replay
			// request by request
			// (docs/benchmarks/2026-12-01-routing-live-vs-replay.md).
			p.d.cfg.Logger.LogAttrs(p.ctx, slog.LevelDebug, "first token", slog.String("request", p.id),
				slog.String("path", p.path), slog.Int("prompt_tokens", p.promptTokens), slog.Int("pulled_blocks", p.pulled),
				slog.Time("submitted", p.submitted), slog.Duration("queue", ph.Queue), slog.Duration("prefill", ph.Prefill),
				slog.Duration("transfer", ph.Transfer))
		}
		if p.d.cfg.Observer != nil {
			p.d.cfg.Observer.ObserveTTFT(p.ctx, ph)
		}
	})
}

// remote tries the remote prefill; nil error and path local means it
// declined (short prompt or nothing to import).
func (p *prepared) remote(ctx context.Context, r *engine.Request, worker string) error {
	d := p.d
	kv := d.cfg.Engine.KV()
	bs := kv.BlockSize
	n := (len(r.Prompt) - 1) / bs // full blocks the engine can reuse: never the one with the last token
	if n <= 0 {
		return nil
	}
	hashes := kvhash.BlockHashes(r.Prompt[:n*bs], bs, r.CacheSalt)
	held := blockIDs(d.cfg.Engine.PinPrefix(hashes))
	k := len(held)
	if len(r.Prompt)-k*bs <= d.cfg.Threshold || k == n {
		d.cfg.Engine.ReleaseBlocks(held)
		return nil
	}
	imported, win, err := d.reserve(n-k, held)
	if err != nil {
		return err
	}
	resp, err := p.call(ctx, r, worker, k, win, uint64(kv.BlockBytes))
	if err == nil {
		err = d.closeWindow(ctx, win)
	}
	if err != nil {
		// The prefill worker may still be writing (we timed out, or the
		// RPC broke): the blocks stay reserved until the window is revoked
		// and no write into it is in flight; only then can they be reused.
		d.cfg.Engine.ReleaseBlocks(held)
		d.quarantine(win, imported)
		return err
	}
	if first, vocab := resp.GetFirstTokenId(), d.vocab; int(first) >= vocab {
		// A prefill worker of another model (or a broken one): neither its
		// token nor its KV is used.
		d.cfg.Engine.ReleaseBlocks(imported)
		d.cfg.Engine.ReleaseBlocks(held)
		return fmt.Errorf("prefill worker %s: first token %d is outside the vocabulary of %d", worker, first, vocab)
	}
	committed, err := d.cfg.Engine.CommitImportedAfter(parentOf(hashes, k), imported, r.Prompt[k*bs:n*bs], r.CacheSalt)
	if err != nil {
		// Refused, nothing committed: the import's references are ours.
		d.cfg.Engine.ReleaseBlocks(imported)
		d.cfg.Engine.ReleaseBlocks(held)
		return fmt.Errorf("committing the import: %w", err)
	}
	// The import's references carried through the commit: the blocks stay
	// out of eviction's reach until the request is submitted (Prepare).
	p.held = append(held, committed...) //nolint:gocritic // held is not used again: p.held takes over its array
	p.path, p.resp = PathRemote, resp
	first := resp.GetFirstTokenId()
	r.FirstToken = &first
	p.span.SetAttributes(attribute.Int("held_blocks", k), attribute.Int("imported_blocks", n-k))
	return nil
}

func (p *prepared) call(ctx context.Context, r *engine.Request, worker string, k int, win *window, blockBytes uint64) (*workerv1.RemotePrefillResponse, error) {
	d := p.d
	// The first token's logprob is computed here, from this engine's own
	// logits for it (package engine, Request.FirstToken). A structured
	// output's first token is masked for the budget of the whole
	// generation here (output_budget), not the prefill's one token, or it
	// could differ from the one this engine would draw.
	sampling := r.Sampling
	sampling.Logprobs, sampling.TopLogprobs = false, 0
	req := &workerv1.RemotePrefillRequest{
		RequestId: r.ID, Model: d.cfg.Model, TokenIds: r.Prompt, Sampling: wire.SamplingProto(sampling),
		FirstBlock: uint32(k), CacheSalt: r.CacheSalt, Priority: int32(r.Priority), ArrivalUnixNanos: arrivalNanos(r.Arrival),
		OutputBudget: uint32(min(int64(d.cfg.Engine.OutputBudget(*r)), math.MaxUint32)),
		Target:       &workerv1.KvTarget{Agent: d.cfg.Agent.Name(), Metadata: win.metadata, Region: uint32(win.region), BlockOffsets: win.offsets, BlockBytes: blockBytes},
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	cctx, span := d.cfg.Tracer.Start(cctx, "disagg.remote_prefill")
	defer span.End()
	start := time.Now()
	res, err := d.cfg.Dial(worker).RemotePrefill(cctx, connect.NewRequest(req))
	p.rpc = time.Since(start)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("remote prefill on %s: %w", worker, err)
	}
	if got := res.Msg.GetBlocksWritten(); int(got) != len(win.offsets) {
		return nil, fmt.Errorf("remote prefill on %s wrote %d blocks, want %d", worker, got, len(win.offsets))
	}
	return res.Msg, nil
}

// arrivalNanos is the arrival a remote prefill carries: the request's own
// (from the frontend), else now, this worker's receipt, which is earlier
// than the prefill worker's and keeps the prompts it sends in their order.
func arrivalNanos(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UnixNano()
}

// reserve reserves n blocks for an import and opens their window. On
// error nothing is left reserved, and held (the caller's pins) is
// released too.
func (d *Decoder) reserve(n int, held []int) (imported []int, win *window, err error) {
	kv := d.cfg.Engine.KV()
	to, err := d.cfg.Engine.AllocateForImport(n)
	if err != nil {
		d.cfg.Engine.ReleaseBlocks(held)
		return nil, nil, fmt.Errorf("reserving %d blocks: %w", n, err)
	}
	imported = blockIDs(to)
	if win, err = d.openWindow(kv.Arena, to, kv.BlockBytes); err != nil {
		d.cfg.Engine.ReleaseBlocks(imported)
		d.cfg.Engine.ReleaseBlocks(held)
		return nil, nil, err
	}
	return imported, win, nil
}

// parentOf is the chained hash before block k of hashes.
func parentOf(hashes []uint64, k int) uint64 {
	if k == 0 {
		return kvhash.Root
	}
	return hashes[k-1]
}

// window is the part of the arena one remote prefill may write: the span
// of its blocks, registered with the agent as a region of its own (an
// alias of the arena's bytes), so that deregistering it revokes the
// prefill worker's access, as invalidating an rkey does on RDMA. A write
// that arrives after is rejected by the target (tcp, local, tagged ucx);
// with one-sided ucx puts, unmapping the region has that effect.
type window struct {
	region   nixl.RegionID
	metadata []byte   // the agent's metadata listing region
	offsets  []uint64 // the blocks' offsets in region
}

func (d *Decoder) openWindow(arena []byte, blocks []kvcache.Region, blockBytes int) (*window, error) {
	lo, hi := blocks[0].Offset, blocks[0].Offset
	for _, b := range blocks {
		lo, hi = min(lo, b.Offset), max(hi, b.Offset)
	}
	hi += blockBytes
	id, err := d.cfg.Agent.RegisterMemory(arena[lo:hi:hi])
	if err != nil {
		return nil, fmt.Errorf("registering the import window: %w", err)
	}
	md, err := d.cfg.Agent.Metadata()
	if err != nil {
		_ = d.cfg.Agent.DeregisterMemory(context.Background(), id)
		return nil, fmt.Errorf("transfer metadata: %w", err)
	}
	w := &window{region: id, metadata: md, offsets: make([]uint64, len(blocks))}
	for i, b := range blocks {
		w.offsets[i] = uint64(b.Offset - lo)
	}
	return w, nil
}

// closeWindow revokes w after a successful prefill, whose writes have all
// completed: nothing is in flight, so it returns at once.
func (d *Decoder) closeWindow(ctx context.Context, w *window) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeWindowTimeout)
	defer cancel()
	if err := d.cfg.Agent.DeregisterMemory(ctx, w.region); err != nil {
		return fmt.Errorf("revoking the import window: %w", err)
	}
	return nil
}

// closeWindowTimeout bounds closeWindow; writes still in flight after a
// successful prefill would be a prefill-worker bug.
const closeWindowTimeout = 5 * time.Second

// quarantine revokes w in the background and releases blocks once no
// write into it is in flight (at once, unless a transfer is stalled; a
// backend ends stalled transfers when it declares the peer gone).
func (d *Decoder) quarantine(w *window, blocks []int) {
	d.quarantined.Add(int64(len(blocks)))
	go func() {
		if err := d.cfg.Agent.DeregisterMemory(context.Background(), w.region); err != nil {
			// Only a closed agent fails here; its backends no longer write.
			d.cfg.Logger.Warn("revoking an import window", "err", err)
		}
		d.cfg.Engine.ReleaseBlocks(blocks)
		d.quarantined.Add(-int64(len(blocks)))
	}()
}

// Quarantined is the number of blocks held back from reuse because a
// failed remote prefill may still be writing into them.
func (d *Decoder) Quarantined() int { return int(d.quarantined.Load()) }

func blockIDs(rs []kvcache.Region) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.Block
	}
	return out
}
