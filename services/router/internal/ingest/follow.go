package ingest

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	kvbmv1 "switchyard.dev/gen/switchyard/kvbm/v1"
	"switchyard.dev/gen/switchyard/kvbm/v1/kvbmv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/radix"
)

// errNeedDump: continuity is lost; the next subscription must dump.
var errNeedDump = errors.New("ingest: continuity lost, resync from a dump")

// follower follows one worker's event stream into the index.
type follower struct {
	in       *Ingester
	w        Worker
	open     source
	needDump bool
	approx   bool // told OnNoEvents, not OnEvents since
	acc      dumpAcc
	evs      []radix.Event
}

// eventStream is a subscription's stream of batches, from a worker or
// from the kvbm-controller's catalog of the shared tier.
type eventStream interface {
	Receive() bool
	Msg() *workerv1.SubscribeKvEventsResponse
	Err() error
	Close() error
}

// source opens a subscription: with a dump, or after a sequence.
type source func(ctx context.Context, dump bool, after uint64) (eventStream, error)

// workerSource subscribes to a worker's own cache.
func workerSource(c workerv1connect.WorkerServiceClient) source {
	return func(ctx context.Context, dump bool, after uint64) (eventStream, error) {
		// The index keys blocks by hash alone: the prompts' token ids
		// would be most of every Stored event's bytes.
		return c.SubscribeKvEvents(ctx, connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: dump, AfterSequence: after, OmitTokenIds: true}))
	}
}

// sharedSource subscribes to one model's namespace of the shared tier.
func sharedSource(c kvbmv1connect.KvbmControllerServiceClient, model string, blockSize uint32) source {
	return func(ctx context.Context, dump bool, after uint64) (eventStream, error) {
		st, err := c.SubscribeSharedEvents(ctx, connect.NewRequest(&kvbmv1.SubscribeSharedEventsRequest{Model: model, BlockSize: blockSize, Dump: dump, AfterSequence: after}))
		if err != nil {
			return nil, err
		}
		return sharedStream{st}, nil
	}
}

// sharedStream reads the batches out of the catalog's stream.
type sharedStream struct {
	*connect.ServerStreamForClient[kvbmv1.SubscribeSharedEventsResponse]
}

func (s sharedStream) Msg() *workerv1.SubscribeKvEventsResponse {
	return s.ServerStreamForClient.Msg().GetBatch()
}

// subscription is the state of one subscription's stream.
type subscription struct {
	dump    bool   // it asked for a dump
	sawDump bool   // the dump has begun (or the cache was empty)
	open    bool   // dump batches arrived, the dump is not complete yet
	dumpSeq uint64 // the dump's sequence
}

// run follows until ctx ends, or the worker turns out to serve no events
// and the ingester handles such workers otherwise.
func (f *follower) run(ctx context.Context) {
	log := f.in.cfg.Logger.With("worker", f.w.ID)
	r := newRetry(f.in)
	for ctx.Err() == nil {
		progressed, err := f.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			r.reset()
		}
		switch code := connect.CodeOf(err); {
		case errors.Is(err, errNeedDump), code == connect.CodeOutOfRange, code == connect.CodeFailedPrecondition:
			log.Info("kv events: resyncing from a dump", "err", err)
			f.needDump = true
			if progressed {
				continue
			}
		case code == connect.CodeUnimplemented && f.in.cfg.OnNoEvents != nil && f.w.SharedModel == "":
			if !f.approx {
				log.Info("kv events: worker serves none, using approximate mode", "ask_again_in", f.in.cfg.NoEventsRetry)
				f.approx = true
				f.in.cfg.OnNoEvents(f.w.ID)
			}
			if !backoff.Sleep(ctx, f.in.cfg.NoEventsRetry) {
				return
			}
			continue
		}
		if !r.wait(ctx, "kv events: stream ended, reconnecting", err, "worker", f.w.ID) {
			return
		}
	}
}

// session runs one subscription; it reports whether any batch arrived.
func (f *follower) session(ctx context.Context) (bool, error) {
	next, err := f.in.cfg.Index.NextSeq(f.w.ID)
	if err != nil {
		return false, fmt.Errorf("ingest: %w", err)
	}
	// Workers number batches from 1 or more (a random start per run), so
	// next == 0 means the index never saw this worker: only a dump can
	// start it.
	dump := f.needDump || next == 0
	after := uint64(0)
	if !dump {
		after = next - 1
	}
	stream, err := f.open(ctx, dump, after)
	if err != nil {
		return false, err
	}
	defer stream.Close()
	progressed, sub := false, subscription{dump: dump}
	for stream.Receive() {
		msg := stream.Msg()
		progressed = true
		if f.approx { // the worker serves events now: stop approximating it first
			f.approx = false
			f.in.cfg.Logger.Info("kv events: worker serves them now, leaving approximate mode", "worker", f.w.ID)
			if f.in.cfg.OnEvents != nil {
				f.in.cfg.OnEvents(f.w.ID)
			}
		}
		if err := f.apply(msg, &sub); err != nil {
			return true, err
		}
		// Continuity holds from the first live batch on. A stream that
		// ends inside a dump (or right after it, before any live batch)
		// leaves the worker needing a dump, so the next subscription
		// asks for one again.
		if !sub.open {
			f.needDump = false
		}
	}
	return progressed, stream.Err()
}

// apply applies one batch of sub's stream.
//
// A dump arrives as batches that all carry the dump's sequence S, the last
// marked dump_complete, then the live batches S+1, S+2, ... The index is
// right after every dump batch: the first replaces the worker's blocks,
// later ones add to them. But until the dump is complete the worker has no
// sequence in the index (radix Reset): a snapshot taken mid-dump, or a
// stream that breaks there, makes the next subscription dump again rather
// than resume after S with part of the cache never sent. The complete dump
// then gets S (radix Resume). Workers before 0.4.0 do not mark the last
// batch; their dump ends at the first live batch.
func (f *follower) apply(msg *workerv1.SubscribeKvEventsResponse, sub *subscription) error {
	ix, id, seq := f.in.cfg.Index, f.w.ID, msg.GetSequence()
	if msg.GetDump() {
		first := !sub.sawDump
		if !first && (!sub.open || seq != sub.dumpSeq) {
			return fmt.Errorf("%w: dump batch at sequence %d (dump at %d, open %t)", errNeedDump, seq, sub.dumpSeq, sub.open)
		}
		var err error
		if first {
			sub.sawDump, sub.open, sub.dumpSeq = true, true, seq
			f.acc.reset()
			f.acc.add(msg.GetEvents())
			err = ix.Reset(id, f.acc.blocks())
		} else {
			f.evs = appendEvents(f.evs[:0], msg.GetEvents())
			err = ix.Apply(id, f.evs...)
		}
		if err == nil && msg.GetDumpComplete() {
			err = f.endDump(sub)
		}
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		return nil
	}
	switch {
	case sub.open: // a worker before 0.4.0: its dump ended with the last batch
		if err := f.endDump(sub); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	case sub.dump && !sub.sawDump && seq > 0:
		// An empty cache dumps no batch: the stream starts live.
		sub.sawDump = true
		if err := ix.Resync(id, seq-1, nil); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	f.evs = appendEvents(f.evs[:0], msg.GetEvents())
	err := ix.ApplyBatch(id, seq, f.evs)
	switch {
	case err == nil, errors.Is(err, radix.ErrSeqStale):
		return nil
	case errors.Is(err, radix.ErrSeqGap), errors.Is(err, radix.ErrInvalidEvent):
		return fmt.Errorf("%w: %w", errNeedDump, err)
	}
	return fmt.Errorf("ingest: %w", err)
}

// endDump gives the worker the dump's sequence: its blocks are in the
// index already, applied batch by batch.
func (f *follower) endDump(sub *subscription) error {
	sub.open = false
	return f.in.cfg.Index.Resume(f.w.ID, sub.dumpSeq)
}
