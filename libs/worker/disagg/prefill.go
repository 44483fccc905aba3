package disagg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/metadata"
	"switchyard.dev/libs/worker/wire"
)

// PrefillEngine is what the prefill side needs from *engine.Engine.
type PrefillEngine interface {
	Submit(ctx context.Context, r engine.Request) (*engine.Stream, error)
	KV() executor.KV
	PinPrefix(hashes []uint64) []kvcache.Region
	ReleaseBlocks(blocks []int)
	EventSeq() uint64
	Subscribe(after uint64) *kvevent.Subscription
}

// ExportConfig configures an Exporter.
type ExportConfig struct {
	Engine PrefillEngine
	// Agent has the engine's arena registered as Region.
	Agent  *nixl.Agent
	Region nixl.RegionID
	Tracer trace.Tracer
	Logger *slog.Logger
	// MaxPeers bounds the decode agents kept known (metadata, connections)
	// between requests; the least recently used idle ones are forgotten
	// beyond it. Default DefaultMaxPeers.
	MaxPeers int
	// CheckTarget, when set, vets the decoded metadata of each request's
	// target before this worker connects to any address in it: a
	// RemotePrefill comes from whoever can reach this worker, and would
	// otherwise make it dial, and write KV to, whatever the request names.
	// Its error refuses the request with PermissionDenied, or with its own
	// code when it is a *connect.Error (a lookup that failed).
	CheckTarget func(ctx context.Context, md *metadata.Agent) error
}

// Exporter is the prefill side. It is safe for concurrent use.
type Exporter struct {
	cfg   ExportConfig
	peers *peerSet
}

// NewExporter returns an Exporter.
func NewExporter(cfg ExportConfig) *Exporter {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.MaxPeers <= 0 {
		cfg.MaxPeers = DefaultMaxPeers
	}
	return &Exporter{cfg: cfg, peers: newPeerSet(cfg.MaxPeers, cfg.Agent.Invalidate)}
}

// cancelWait bounds the wait for cancelled writes to stop touching the
// pinned blocks: longer than a ucx connection closed mid-WRITE keeps
// sending its data (5 s).
const cancelWait = 10 * time.Second

// Prefill computes m's prompt and writes the requested blocks into the
// target. Errors are Connect errors.
func (x *Exporter) Prefill(ctx context.Context, m *workerv1.RemotePrefillRequest) (*workerv1.RemotePrefillResponse, error) {
	recv := time.Now()
	kv := x.cfg.Engine.KV()
	first, end, err := checkTarget(m, kv)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	peer, done, err := x.openTarget(ctx, m.GetTarget(), recv)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, span := x.cfg.Tracer.Start(ctx, "disagg.export", trace.WithAttributes(
		attribute.Int("prompt_tokens", len(m.GetTokenIds())), attribute.Int("blocks", end-first)))
	defer span.End()
	w := &writer{x: x, peer: peer, target: m.GetTarget(), first: first,
		hashes: kvhash.BlockHashes(m.GetTokenIds()[:end*kv.BlockSize], kv.BlockSize, m.GetCacheSalt())}
	defer w.release()
	res, err := w.run(ctx, m, recv)
	if err != nil {
		span.RecordError(err)
		return nil, err
	}
	return res, nil
}

func checkTarget(m *workerv1.RemotePrefillRequest, kv executor.KV) (first, end int, err error) {
	n := len(m.GetTokenIds())
	first, end, err = targetBlocks(m.GetTarget(), m.GetFirstBlock(), kv)
	if err == nil && (n == 0 || end > (n-1)/kv.BlockSize) {
		err = fmt.Errorf("blocks %d..%d are not full prompt blocks before the last token (%d tokens, blocks of %d)", first, end-1, n, kv.BlockSize)
	}
	return first, end, err
}

// targetBlocks checks what every target must be (this worker's block
// size, at least one block) and returns the prompt blocks it asks for,
// [first, end).
func targetBlocks(t *workerv1.KvTarget, firstBlock uint32, kv executor.KV) (first, end int, err error) {
	switch {
	case t.GetBlockBytes() != uint64(kv.BlockBytes):
		return 0, 0, fmt.Errorf("target block_bytes %d, this worker's blocks hold %d (different model or block size)", t.GetBlockBytes(), kv.BlockBytes)
	case len(t.GetBlockOffsets()) == 0:
		return 0, 0, errors.New("target names no blocks")
	}
	first = int(firstBlock)
	return first, first + len(t.GetBlockOffsets()), nil
}

// openTarget vets t's agent (vetTarget), counts it in use among the peers
// until done is called, and loads its metadata. Vetted first: a refused
// target must not take a place among the peers (which would push out
// real ones). Then in use before its metadata is loaded, so a concurrent
// request for another peer cannot forget it in between. Errors are
// Connect errors.
func (x *Exporter) openTarget(ctx context.Context, t *workerv1.KvTarget, now time.Time) (peer string, done func(), err error) {
	md, err := x.vetTarget(ctx, t)
	if err != nil {
		return "", nil, err
	}
	peer = md.Name
	x.peers.use(peer, now)
	if err := x.cfg.Agent.LoadRemoteAgent(md); err != nil {
		x.peers.done(peer)
		return "", nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("target metadata: %w", err))
	}
	return peer, func() { x.peers.done(peer) }, nil
}

// vetTarget decodes the target's metadata and checks it (CheckTarget)
// before anything connects to it. Every remote prefill carries a fresh
// blob (its own window); the agent keeps the newest of a run. Errors are
// Connect errors: PermissionDenied for a refused target, or the check's
// own Connect error (a discovery lookup that failed).
func (x *Exporter) vetTarget(ctx context.Context, t *workerv1.KvTarget) (*metadata.Agent, error) {
	md, err := metadata.Decode(t.GetMetadata())
	switch {
	case err != nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("target metadata: %w", err))
	case md.Name != t.GetAgent():
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("target metadata names agent %q, target says %q", md.Name, t.GetAgent()))
	}
	if x.cfg.CheckTarget != nil {
		if err := x.cfg.CheckTarget(ctx, md); err != nil {
			if ce := new(connect.Error); errors.As(err, &ce) {
				return nil, ce
			}
			return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("target agent %q: %w", md.Name, err))
		}
	}
	return md, nil
}

// writer streams one request's blocks as the engine commits them.
type writer struct {
	x      *Exporter
	peer   string
	target *workerv1.KvTarget
	first  int
	hashes []uint64 // prompt blocks 0..end-1

	sent  int // blocks from first on that are pinned and posted
	pins  []int
	xfers []*nixl.Xfer
	bytes uint64
}

// prefillRequest is the engine request a remote prefill runs: the prompt
// and its first token only, in the request's priority and arrival order,
// a structured output's first token held to the decode worker's budget.
func prefillRequest(m *workerv1.RemotePrefillRequest) engine.Request {
	return engine.Request{ID: m.GetRequestId(), Prompt: m.GetTokenIds(), Sampling: wire.Sampling(m.GetSampling()),
		Stop: engine.StopParams{MaxTokens: 1, IgnoreEOS: true}, CacheSalt: m.GetCacheSalt(),
		Priority: int(m.GetPriority()), Arrival: wire.Arrival(m.GetArrivalUnixNanos()),
		FormatBudget: int(min(m.GetOutputBudget(), math.MaxInt32))}
}

func (w *writer) run(ctx context.Context, m *workerv1.RemotePrefillRequest, recv time.Time) (*workerv1.RemotePrefillResponse, error) {
	if err := wire.Unhonoured(m.GetSampling()); err != nil {
		return nil, err
	}
	eng := w.x.cfg.Engine
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := eng.Subscribe(eng.EventSeq())
	changed := make(chan struct{}, 1)
	go func() {
		for {
			if _, err := sub.Next(ctx); err != nil {
				return // ctx ended, or a gap: the final pass after the first token catches up
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	submit := time.Now()
	st, err := eng.Submit(ctx, prefillRequest(m))
	if err != nil {
		return nil, wire.SubmitError(ctx, err)
	}
	type result struct {
		o   engine.Output
		err error
	}
	firstCh := make(chan result, 1)
	go func() {
		o, err := st.Recv(ctx)
		firstCh <- result{o, err}
	}()
	if err := w.pump(); err != nil {
		return nil, err
	}
	var out result
	for done := false; !done; {
		select {
		case <-changed:
			if err := w.pump(); err != nil {
				return nil, err
			}
		case out = <-firstCh:
			done = true
		}
	}
	firstAt := time.Now()
	switch {
	case out.err != nil: // Recv fails only when ctx ends
		return nil, wire.ContextError(ctx, fmt.Errorf("prefill: %w", out.err))
	case ctx.Err() != nil: // a cancelled request may still deliver its last output
		return nil, wire.ContextError(ctx, fmt.Errorf("prefill: %w", ctx.Err()))
	case out.o.Finish == engine.FinishError:
		return nil, wire.FinishError(fmt.Errorf("prefill: %w", out.o.Err))
	case len(out.o.TokenIDs) == 0:
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("prefill ended without a token (%s)", out.o.Finish))
	}
	if err := w.pump(); err != nil {
		return nil, err
	}
	if want := len(w.hashes) - w.first; w.sent < want {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("only %d of %d blocks still cached after prefill (evicted)", w.sent, want))
	}
	if err := w.wait(ctx); err != nil {
		return nil, err
	}
	doneAt := time.Now()
	queue := submit.Sub(recv) + out.o.QueueTime
	return &workerv1.RemotePrefillResponse{
		FirstTokenId: out.o.TokenIDs[0], BlocksWritten: uint32(w.sent), BytesWritten: w.bytes,
		CachedTokens:      uint32(out.o.Usage.CachedPromptTokens),
		QueueNanos:        uint64(queue),
		PrefillNanos:      uint64(max(firstAt.Sub(recv)-queue, 0)),
		TransferTailNanos: uint64(doneAt.Sub(firstAt)),
		TransferNanos:     uint64(w.busy()),
	}, nil
}

// pump pins the target blocks now cached, in order from the first unsent
// one, and posts their write.
func (w *writer) pump() error {
	if w.first+w.sent >= len(w.hashes) {
		return nil
	}
	regs := w.x.cfg.Engine.PinPrefix(w.hashes[w.first+w.sent:])
	if len(regs) == 0 {
		return nil
	}
	local := make([]nixl.Desc, len(regs))
	remote := make([]nixl.Desc, len(regs))
	bb := w.target.GetBlockBytes()
	for i, r := range regs {
		w.pins = append(w.pins, r.Block)
		local[i] = nixl.Desc{Region: w.x.cfg.Region, Offset: uint64(r.Offset), Len: uint64(r.Length)}
		remote[i] = nixl.Desc{Region: nixl.RegionID(w.target.GetRegion()), Offset: w.target.GetBlockOffsets()[w.sent+i], Len: bb}
	}
	xf, err := w.x.cfg.Agent.Post(nixl.XferRequest{Op: nixl.Write, Peer: w.peer, Local: local, Remote: remote})
	if err != nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("posting KV write: %w", err))
	}
	w.xfers = append(w.xfers, xf)
	w.sent += len(regs)
	w.bytes += uint64(len(regs)) * bb
	return nil
}

// wait waits for every posted write.
func (w *writer) wait(ctx context.Context) error {
	for _, xf := range w.xfers {
		if err := xf.Wait(ctx); err != nil {
			err = fmt.Errorf("KV write to %s: %w", w.peer, err)
			if ctx.Err() != nil {
				return wire.ContextError(ctx, err)
			}
			return connect.NewError(connect.CodeUnavailable, err)
		}
	}
	return nil
}

// busy sums the writes' post-to-done times.
func (w *writer) busy() time.Duration {
	var d time.Duration
	for _, xf := range w.xfers {
		d += xf.Elapsed()
	}
	return d
}

// release cancels writes still in flight, waits (bounded) until the
// backend no longer reads the pinned blocks, and unpins them.
// The bound covers all the writes together: once it has passed, the
// writes still running are not waited for.
func (w *writer) release() {
	for _, xf := range w.xfers {
		xf.Cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
	defer cancel()
	stuck := 0
	for _, xf := range w.xfers {
		select {
		case <-xf.Done():
		case <-ctx.Done():
			stuck++
		}
	}
	if stuck > 0 {
		w.x.cfg.Logger.Warn("KV writes did not stop after cancel; unpinning anyway", "peer", w.peer, "writes", stuck)
	}
	w.x.cfg.Engine.ReleaseBlocks(w.pins)
}
