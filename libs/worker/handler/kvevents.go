package handler

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/worker/wire"
)

// dumpChunk bounds the events of one dump message, so a large cache does
// not make one huge message.
const dumpChunk = 256

// SubscribeKvEvents implements WorkerServiceHandler. With dump set it first
// sends the cached blocks (dump=true messages, all numbered with the
// sequence they reflect) and then continues after that sequence, ignoring
// after_sequence; otherwise it resumes after after_sequence. A position
// that is not buffered, or is ahead of the latest batch, is OutOfRange.
// The stream ends with Unavailable when the worker drains. An engine that
// publishes no KV events makes it Unimplemented, which tells the router to
// approximate this worker's cache from its own routing decisions.
func (h *Handler) SubscribeKvEvents(ctx context.Context, req *connect.Request[workerv1.SubscribeKvEventsRequest], out *connect.ServerStream[workerv1.SubscribeKvEventsResponse]) error {
	kv := h.eng.KV()
	if kv == nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("this worker's engine publishes no KV events"))
	}
	ctx, cancel := h.untilStopped(ctx)
	defer cancel()
	after, tokens := req.Msg.GetAfterSequence(), !req.Msg.GetOmitTokenIds()
	if req.Msg.GetDump() {
		seq, err := sendDump(kv.Dump(), tokens, out)
		if err != nil {
			return err
		}
		after = seq
	} else if after > 0 {
		// A position ahead of the latest batch belongs to another run of
		// this worker (each run starts at a random sequence number), as
		// does one below the run's start (ErrGap from the journal).
		if last := kv.EventSeq(); after > last {
			return connect.NewError(connect.CodeOutOfRange, fmt.Errorf("after_sequence %d is ahead of this worker's latest batch %d (did it restart?); resubscribe with dump=true", after, last))
		}
	}
	sub := kv.Subscribe(after)
	for {
		b, err := sub.Next(ctx)
		if err != nil {
			return h.subscribeError(ctx, err)
		}
		if err := out.Send(&workerv1.SubscribeKvEventsResponse{Sequence: b.Seq, Events: Events(b.Events, tokens)}); err != nil {
			return err
		}
	}
}

func (h *Handler) subscribeError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, kvevent.ErrGap):
		return connect.NewError(connect.CodeOutOfRange, fmt.Errorf("%w; resubscribe with dump=true", err))
	case h.isStopped():
		return connect.NewError(connect.CodeUnavailable, wire.ErrDraining)
	}
	return wire.ContextError(ctx, err)
}

// untilStopped returns ctx, also cancelled when Drain begins.
func (h *Handler) untilStopped(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-h.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (h *Handler) isStopped() bool {
	select {
	case <-h.stopped:
		return true
	default:
		return false
	}
}

// sendDump sends d in chunks (at least one message, so an empty cache still
// tells the subscriber the sequence), the last marked dump_complete, and
// returns its sequence. Without tokens, Stored events carry no token ids.
func sendDump(d kvevent.Batch, tokens bool, out *connect.ServerStream[workerv1.SubscribeKvEventsResponse]) (uint64, error) {
	events := d.Events
	for first := true; first || len(events) > 0; first = false {
		n := min(len(events), dumpChunk)
		msg := &workerv1.SubscribeKvEventsResponse{Sequence: d.Seq, Events: Events(events[:n], tokens), Dump: true, DumpComplete: n == len(events)}
		if err := out.Send(msg); err != nil {
			return 0, err
		}
		events = events[n:]
	}
	return d.Seq, nil
}

// Events converts engine KV events to their wire form, dropping kinds the
// contract does not know (none today). Without tokens, Stored events carry
// no token ids (SubscribeKvEventsRequest.omit_token_ids).
func Events(in []kvevent.Event, tokens bool) []*workerv1.KvEvent {
	out := make([]*workerv1.KvEvent, 0, len(in))
	for i := range in {
		e := Event(&in[i])
		if s := e.GetStored(); s != nil && !tokens {
			s.TokenIds = nil
		}
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// Event converts one engine KV event, or returns nil for an unknown kind.
func Event(e *kvevent.Event) *workerv1.KvEvent {
	switch e.Kind {
	case kvevent.Stored:
		s := &workerv1.KvBlocksStored{BlockHashes: e.BlockHashes, TokenIds: e.TokenIDs, BlockSize: u32(e.BlockSize), Tier: Tier(e.Tier)}
		if e.ParentHash != kvhash.Root {
			p := e.ParentHash
			s.ParentHash = &p
		}
		return &workerv1.KvEvent{Event: &workerv1.KvEvent_Stored{Stored: s}}
	case kvevent.Removed:
		return &workerv1.KvEvent{Event: &workerv1.KvEvent_Removed{Removed: &workerv1.KvBlocksRemoved{BlockHashes: e.BlockHashes, Tier: Tier(e.Tier)}}}
	case kvevent.Cleared:
		return &workerv1.KvEvent{Event: &workerv1.KvEvent_Cleared{Cleared: &workerv1.KvCleared{}}}
	}
	return nil
}

// Tier maps a tier to the wire enum; an undefined tier is
// STORAGE_TIER_UNSPECIFIED.
func Tier(t kvtier.Tier) commonv1.StorageTier {
	switch t {
	case kvtier.Device:
		return commonv1.StorageTier_STORAGE_TIER_DEVICE
	case kvtier.Host:
		return commonv1.StorageTier_STORAGE_TIER_HOST
	case kvtier.Disk:
		return commonv1.StorageTier_STORAGE_TIER_DISK
	case kvtier.External:
		return commonv1.StorageTier_STORAGE_TIER_EXTERNAL
	}
	return commonv1.StorageTier_STORAGE_TIER_UNSPECIFIED
}
