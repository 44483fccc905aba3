package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/radix"
)

// errNeedDump: continuity is lost; the next subscription must dump.
var errNeedDump = errors.New("ingest: continuity lost, resync from a dump")

// follower follows one worker's event stream into the index.
type follower struct {
	in       *Ingester
	w        Worker
	client   workerv1connect.WorkerServiceClient
	needDump bool
	acc      dumpAcc
	evs      []radix.Event
}

// run follows until ctx ends, or the worker turns out to serve no events
// and the ingester handles such workers otherwise.
func (f *follower) run(ctx context.Context) {
	log := f.in.cfg.Logger.With("worker", f.w.ID)
	backoff, failures := time.Duration(0), 0
	for ctx.Err() == nil {
		progressed, err := f.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			backoff, failures = 0, 0
		}
		switch code := connect.CodeOf(err); {
		case errors.Is(err, errNeedDump), code == connect.CodeOutOfRange, code == connect.CodeFailedPrecondition:
			log.Info("kv events: resyncing from a dump", "err", err)
			f.needDump = true
			if progressed {
				continue
			}
		case code == connect.CodeUnimplemented && f.in.cfg.OnNoEvents != nil:
			log.Info("kv events: worker serves none, using approximate mode")
			f.in.cfg.OnNoEvents(f.w.ID)
			return
		}
		failures++
		backoff = min(max(2*backoff, f.in.cfg.MinBackoff), f.in.cfg.MaxBackoff)
		if discovery.LogRetry(failures) {
			log.Warn("kv events: stream ended, reconnecting", "err", err, "failures", failures, "retry_in", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session runs one subscription; it reports whether any batch arrived.
func (f *follower) session(ctx context.Context) (bool, error) {
	next, err := f.in.cfg.Index.NextSeq(f.w.ID)
	if err != nil {
		return false, fmt.Errorf("ingest: %w", err)
	}
	// Sequence numbers of workers start at 1, so next == 0 means the index
	// never saw this worker: only a dump can start it.
	dump := f.needDump || next == 0
	req := &workerv1.SubscribeKvEventsRequest{Dump: dump}
	if !dump {
		req.AfterSequence = next - 1
	}
	stream, err := f.client.SubscribeKvEvents(ctx, connect.NewRequest(req))
	if err != nil {
		return false, err
	}
	defer stream.Close()
	progressed, sawDump := false, false
	for stream.Receive() {
		msg := stream.Msg()
		progressed = true
		if err := f.apply(msg, dump, &sawDump); err != nil {
			return true, err
		}
		f.needDump = false
	}
	return progressed, stream.Err()
}

// apply applies one batch of a subscription that asked for a dump when
// dump is set.
func (f *follower) apply(msg *workerv1.SubscribeKvEventsResponse, dump bool, sawDump *bool) error {
	ix, id, seq := f.in.cfg.Index, f.w.ID, msg.GetSequence()
	if msg.GetDump() {
		// The first batch of a dump replaces the worker's state; later
		// batches of it add to that. The index is right after every batch,
		// whether or not more dump batches follow.
		if !*sawDump {
			*sawDump = true
			f.acc.reset()
			f.acc.add(msg.GetEvents())
			if err := ix.Resync(id, seq, f.acc.blocks()); err != nil {
				return fmt.Errorf("ingest: %w", err)
			}
			return nil
		}
		f.evs = appendEvents(f.evs[:0], msg.GetEvents())
		if err := ix.Apply(id, f.evs...); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		return nil
	}
	if dump && !*sawDump && seq > 0 {
		// An empty cache dumps no batch: the stream starts live.
		*sawDump = true
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
