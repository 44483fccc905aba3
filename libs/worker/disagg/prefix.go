package disagg

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/kvhash"
)

// Prefix pull: a worker about to prefill a prompt whose leading blocks
// another worker holds (the router names it, RouteResponse.prefix_source)
// copies those blocks from it instead of computing them. The router can
// then send a conversation's next turn to an idle worker rather than
// queue it behind its busy holder, without giving up the cache hit.
//
// It is the remote prefill's import without the remote computation: the
// puller pins what it holds, reserves blocks for the rest of the named
// prefix, and asks the holder (ExportPrefix) to write the leading run of
// them that it still caches; it commits the blocks written, releases the
// others, and prefills the remainder locally. The holder pins each block
// while the write reads it and computes nothing. A copy of the KV the
// holder computed is the KV the puller would compute (same model, same
// tokens, same kernels), so greedy output is unchanged.

// pullTimeout bounds a prefix pull (with DecodeConfig.Timeout, if lower).
// Requests queued behind a pulling one wait for it (sched.Seq.Ready), so a
// hung holder must not hold them long; a healthy pull takes milliseconds
// (the whole prefix of a 100,000-token prompt of Llama-3-8B is 13 GB, half
// a second at 25 GB/s).
const pullTimeout = 5 * time.Second

// ExportPrefix writes m's cached blocks into the target. Errors are
// Connect errors.
func (x *Exporter) ExportPrefix(ctx context.Context, m *workerv1.ExportPrefixRequest) (*workerv1.ExportPrefixResponse, error) {
	kv := x.cfg.Engine.KV()
	first, end, err := checkPrefixTarget(m, kv)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	peer, done, err := x.openTarget(ctx, m.GetTarget(), time.Now())
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, span := x.cfg.Tracer.Start(ctx, "disagg.export_prefix", trace.WithAttributes(attribute.Int("blocks", end-first)))
	defer span.End()
	w := &writer{x: x, peer: peer, target: m.GetTarget(), first: first,
		hashes: kvhash.BlockHashes(m.GetTokenIds()[:end*kv.BlockSize], kv.BlockSize, m.GetCacheSalt())}
	defer w.release()
	if err := w.pump(); err != nil {
		span.RecordError(err)
		return nil, err
	}
	if err := w.wait(ctx); err != nil {
		span.RecordError(err)
		return nil, err
	}
	span.SetAttributes(attribute.Int("blocks_written", w.sent))
	return &workerv1.ExportPrefixResponse{BlocksWritten: uint32(w.sent), BytesWritten: w.bytes, TransferNanos: uint64(w.busy())}, nil
}

func checkPrefixTarget(m *workerv1.ExportPrefixRequest, kv executor.KV) (first, end int, err error) {
	n := len(m.GetTokenIds())
	first, end, err = targetBlocks(m.GetTarget(), m.GetFirstBlock(), kv)
	if err == nil && end*kv.BlockSize > n {
		err = fmt.Errorf("blocks %d..%d are not full blocks of the %d tokens given (blocks of %d)", first, end-1, n, kv.BlockSize)
	}
	return first, end, err
}

// pull starts importing the prompt's leading blocks that worker holds
// beyond what this engine caches, up to the first holds of them, and sets
// r.Ready: the engine queues r at once, in its place, and admits it once
// the copy is committed (or has failed), so the request waits for its KV
// no longer than its turn would have taken anyway. The copy's references
// are the pull's own: it releases them once the blocks are committed, when
// they are cached and the most recently used (see Prepare). A nil error
// with r.Ready unset means there was nothing to pull; an error means the
// pull did not start.
func (p *prepared) pull(ctx context.Context, r *engine.Request, worker string, holds int) error {
	d := p.d
	kv := d.cfg.Engine.KV()
	bs := kv.BlockSize
	n := min((len(r.Prompt)-1)/bs, holds) // never the block with the last token: it is computed for logits
	if n <= 0 {
		return nil
	}
	hashes := kvhash.BlockHashes(r.Prompt[:n*bs], bs, r.CacheSalt)
	held := blockIDs(d.cfg.Engine.PinPrefix(hashes))
	k := len(held)
	if k >= n {
		d.cfg.Engine.ReleaseBlocks(held)
		return nil
	}
	imported, win, err := d.reserve(n-k, held)
	if err != nil {
		return err
	}
	req := &workerv1.ExportPrefixRequest{RequestId: r.ID, Model: d.cfg.Model, TokenIds: r.Prompt[:n*bs],
		FirstBlock: uint32(k), CacheSalt: r.CacheSalt,
		Target: &workerv1.KvTarget{Agent: d.cfg.Agent.Name(), Metadata: win.metadata, Region: uint32(win.region), BlockOffsets: win.offsets, BlockBytes: uint64(kv.BlockBytes)}}
	ready := make(chan struct{})
	p.pulling, r.Ready = ready, ready
	prompt, salt := r.Prompt, r.CacheSalt
	go func() {
		defer close(ready)
		defer p.endSpan()
		got, err := p.copyPrefix(ctx, worker, req, win, held, imported, hashes, prompt, salt)
		if err != nil {
			p.path = PathFallback
			p.span.RecordError(err)
			d.cfg.Logger.WarnContext(ctx, "prefix pull failed; prefilling locally", "request", req.GetRequestId(), "prefix_worker", worker, "err", err)
			return
		}
		if got > 0 {
			p.path, p.pulled = PathPulled, got
		}
	}()
	return nil
}

// copyPrefix runs a started pull to its end: the holder's writes, then
// the commit of what it wrote. It releases every reference it was given,
// or leaves them with the quarantine when the holder may still be writing.
func (p *prepared) copyPrefix(ctx context.Context, worker string, req *workerv1.ExportPrefixRequest, win *window, held, imported []int, hashes []uint64, prompt []uint32, salt uint64) (int, error) {
	d := p.d
	defer d.cfg.Engine.ReleaseBlocks(held)
	cctx, cancel := context.WithTimeout(ctx, min(d.cfg.Timeout, pullTimeout))
	defer cancel()
	cctx, span := d.cfg.Tracer.Start(cctx, "disagg.pull_prefix", trace.WithAttributes(attribute.Int("blocks", len(imported))))
	defer span.End()
	start := time.Now()
	res, err := d.cfg.Dial(worker).ExportPrefix(cctx, connect.NewRequest(req))
	p.rpc = time.Since(start)
	if err == nil && int(res.Msg.GetBlocksWritten()) > len(win.offsets) {
		err = fmt.Errorf("wrote %d blocks, %d asked", res.Msg.GetBlocksWritten(), len(win.offsets))
	}
	if err == nil {
		err = d.closeWindow(ctx, win)
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		// The holder may still be writing: quarantine, as a failed remote
		// prefill does.
		d.quarantine(win, imported)
		return 0, fmt.Errorf("prefix pull from %s: %w", worker, err)
	}
	got := int(res.Msg.GetBlocksWritten())
	d.cfg.Engine.ReleaseBlocks(imported[got:])
	if got == 0 {
		return 0, nil
	}
	k, bs := int(req.GetFirstBlock()), d.cfg.Engine.KV().BlockSize
	committed, err := d.cfg.Engine.CommitImportedAfter(parentOf(hashes, k), imported[:got], prompt[k*bs:(k+got)*bs], salt)
	if err != nil {
		d.cfg.Engine.ReleaseBlocks(imported[:got])
		return 0, fmt.Errorf("committing the pulled blocks: %w", err)
	}
	d.cfg.Engine.ReleaseBlocks(committed)
	span.SetAttributes(attribute.Int("blocks_written", got))
	return got, nil
}
