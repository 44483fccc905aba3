// Package workertest is a fake WorkerService for router tests: a worker
// whose KV cache the test edits directly, which streams the resulting
// events with sequence numbers, dumps and bounded history exactly as the
// worker contract (switchyard.worker.v1) says. Tests use it to drive the
// router's ingestion without running engines.
package workertest

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/radix"
)

// Worker is a fake worker. Its methods are safe for concurrent use.
type Worker struct {
	workerv1connect.UnimplementedWorkerServiceHandler
	URL  string
	Addr string

	mu       sync.Mutex
	start    uint64                                // the run's sequence before its first batch
	batches  []*workerv1.SubscribeKvEventsResponse // batches[i].Sequence == start+i+1
	oldest   uint64                                // history before it is gone
	hidden   map[uint64]bool                       // never sent live (a gap)
	blocks   map[uint64]bool
	changed  chan struct{}
	requests []*workerv1.SubscribeKvEventsRequest
	accepts  []string // each subscription's Connect-Accept-Encoding
	noEvents bool
	chunk    int  // events per dump batch; 0: one batch
	legacy   bool // dumps without dump_complete (workers before 0.4.0)
	breakAt  int  // > 0: the next dump's stream breaks after this many batches
}

// Start serves a fake worker on loopback until the test ends.
func Start(t testing.TB) *Worker {
	t.Helper()
	w := &Worker{blocks: map[uint64]bool{}, changed: make(chan struct{}), oldest: 1, hidden: map[uint64]bool{}}
	mux := http.NewServeMux()
	mux.Handle(workerv1connect.NewWorkerServiceHandler(w))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	w.URL, w.Addr = srv.URL, srv.Listener.Addr().String()
	return w
}

// StartAfter numbers the worker's batches from start+1, as a worker run
// that began at a random sequence number; call it before any Store.
func (w *Worker) StartAfter(start uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.batches) > 0 {
		panic("workertest: StartAfter after the first batch")
	}
	w.start, w.oldest = start, start+1
}

// DumpInChunks makes dumps span batches of n events each (all with the
// dump's sequence number), as real workers send them.
func (w *Worker) DumpInChunks(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.chunk = n
}

// LegacyDump makes dumps leave dump_complete unset, as workers before
// 0.4.0 do.
func (w *Worker) LegacyDump() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.legacy = true
}

// BreakDumpAfter makes the next dump's stream fail (Unavailable) after n
// of its batches, once.
func (w *Worker) BreakDumpAfter(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.breakAt = n
}

// ServeEvents undoes NoEvents (a worker upgraded in place).
func (w *Worker) ServeEvents() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noEvents = false
}

// NoEvents makes SubscribeKvEvents answer Unimplemented.
func (w *Worker) NoEvents() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noEvents = true
}

func (w *Worker) lastLocked() uint64 { return w.start + uint64(len(w.batches)) }

func (w *Worker) appendLocked(ev *workerv1.KvEvent, hidden bool) uint64 {
	seq := w.lastLocked() + 1
	w.batches = append(w.batches, &workerv1.SubscribeKvEventsResponse{Sequence: seq, Events: []*workerv1.KvEvent{ev}})
	if hidden {
		w.hidden[seq] = true
	}
	close(w.changed)
	w.changed = make(chan struct{})
	return seq
}

// Store caches hashes (device tier) and publishes the batch; it returns
// the batch's sequence number.
func (w *Worker) Store(hashes ...uint64) uint64 { return w.store(false, hashes) }

// StoreHidden is Store whose batch is never sent live: subscribers see a
// gap.
func (w *Worker) StoreHidden(hashes ...uint64) uint64 { return w.store(true, hashes) }

func (w *Worker) store(hidden bool, hashes []uint64) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hashes {
		w.blocks[h] = true
	}
	return w.appendLocked(&workerv1.KvEvent{Event: &workerv1.KvEvent_Stored{Stored: &workerv1.KvBlocksStored{
		BlockHashes: slices.Clone(hashes), Tier: commonv1.StorageTier_STORAGE_TIER_DEVICE}}}, hidden)
}

// Remove evicts hashes and publishes the batch.
func (w *Worker) Remove(hashes ...uint64) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hashes {
		delete(w.blocks, h)
	}
	return w.appendLocked(&workerv1.KvEvent{Event: &workerv1.KvEvent_Removed{Removed: &workerv1.KvBlocksRemoved{
		BlockHashes: slices.Clone(hashes), Tier: commonv1.StorageTier_STORAGE_TIER_DEVICE}}}, false)
}

// Forget drops the history up to and including seq: resuming before it
// answers OutOfRange.
func (w *Worker) Forget(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.oldest = seq + 1
}

// State is what the index should hold for this worker: its blocks and the
// next sequence number.
func (w *Worker) State() radix.WorkerState {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := radix.WorkerState{Next: w.lastLocked() + 1}
	for h := range w.blocks {
		st.Blocks = append(st.Blocks, radix.Block{Hash: h, Tiers: kvtier.Device.Mask()})
	}
	slices.SortFunc(st.Blocks, func(a, b radix.Block) int { return cmp.Compare(a.Hash, b.Hash) })
	return st
}

// Requests returns the subscriptions received so far.
func (w *Worker) Requests() []*workerv1.SubscribeKvEventsRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.requests)
}

// AcceptEncodings returns each subscription's Connect-Accept-Encoding
// header, in order: the compressions the subscriber takes.
func (w *Worker) AcceptEncodings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.accepts)
}

// SubscribeKvEvents implements the worker contract.
func (w *Worker) SubscribeKvEvents(ctx context.Context, req *connect.Request[workerv1.SubscribeKvEventsRequest], stream *connect.ServerStream[workerv1.SubscribeKvEventsResponse]) error {
	w.mu.Lock()
	w.requests = append(w.requests, req.Msg)
	w.accepts = append(w.accepts, req.Header().Get("Connect-Accept-Encoding"))
	if w.noEvents {
		w.mu.Unlock()
		return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("no kv events"))
	}
	after := req.Msg.GetAfterSequence()
	var dump []*workerv1.SubscribeKvEventsResponse
	broken := false // BreakDumpAfter: the stream fails after dump
	if req.Msg.GetDump() {
		after = w.lastLocked()
		var evs []*workerv1.KvEvent
		for h := range w.blocks {
			evs = append(evs, &workerv1.KvEvent{Event: &workerv1.KvEvent_Stored{Stored: &workerv1.KvBlocksStored{BlockHashes: []uint64{h}}}})
		}
		n := len(evs)
		if w.chunk > 0 {
			n = w.chunk
		}
		for len(evs) > 0 || dump == nil {
			k := min(n, len(evs))
			dump = append(dump, &workerv1.SubscribeKvEventsResponse{Sequence: after, Dump: true, Events: evs[:k], DumpComplete: k == len(evs) && !w.legacy})
			evs = evs[k:]
		}
		if w.breakAt > 0 && w.breakAt < len(dump) {
			dump, w.breakAt, broken = dump[:w.breakAt], 0, true
		}
	} else if after+1 < w.oldest {
		w.mu.Unlock()
		return connect.NewError(connect.CodeOutOfRange, fmt.Errorf("history after %d is gone; oldest is %d", after, w.oldest))
	} else if last := w.lastLocked(); after > last {
		w.mu.Unlock()
		return connect.NewError(connect.CodeOutOfRange, fmt.Errorf("after %d is ahead of the latest batch %d", after, last))
	}
	w.mu.Unlock()
	for _, b := range dump {
		if err := stream.Send(b); err != nil {
			return err
		}
	}
	if broken {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("stream broken mid-dump"))
	}
	return w.stream(ctx, after, stream)
}

func (w *Worker) stream(ctx context.Context, after uint64, stream *connect.ServerStream[workerv1.SubscribeKvEventsResponse]) error {
	for {
		w.mu.Lock()
		var pending []*workerv1.SubscribeKvEventsResponse
		for _, b := range w.batches[after-w.start:] {
			if !w.hidden[b.Sequence] {
				pending = append(pending, b)
			}
		}
		after = w.lastLocked()
		changed := w.changed
		w.mu.Unlock()
		for _, b := range pending {
			if err := stream.Send(b); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}
