package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"switchyard.dev/libs/kvevents"
	"switchyard.dev/libs/radix"
)

// VLLMWorker is a static vLLM/SGLang worker publishing KV events over
// ZeroMQ, as given by -vllm-endpoint.
type VLLMWorker struct {
	ID       string
	Endpoint string // PUB socket, tcp://host:port
	Replay   string // optional ROUTER replay socket
	Topic    string
}

// ParseVLLM parses "worker-id=tcp://host:port[,replay=tcp://...][,topic=T]".
func ParseVLLM(s string) (VLLMWorker, error) {
	parts := strings.Split(s, ",")
	id, ep, ok := strings.Cut(parts[0], "=")
	if !ok || id == "" || !strings.HasPrefix(ep, "tcp://") && !strings.HasPrefix(ep, "ipc://") {
		return VLLMWorker{}, fmt.Errorf("%q: want worker-id=tcp://host:port[,replay=tcp://host:port][,topic=T]", s)
	}
	w := VLLMWorker{ID: id, Endpoint: ep}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "replay":
			w.Replay = v
		case "topic":
			w.Topic = v
		default:
			return VLLMWorker{}, fmt.Errorf("%q: unknown option %q (want replay or topic)", s, k)
		}
	}
	return w, nil
}

// FollowVLLM follows a static ZeroMQ worker until ctx ends. The worker is
// never removed by Sync. A restored snapshot's sequence is resumed.
func (in *Ingester) FollowVLLM(ctx context.Context, w VLLMWorker) {
	in.mu.Lock()
	in.static[w.ID] = true
	in.addWorker(w.ID)
	in.mu.Unlock()
	cfg := kvevents.Config{Endpoint: w.Endpoint, ReplayEndpoint: w.Replay, Topic: w.Topic, Logger: in.cfg.Logger.With("worker", w.ID)}
	if next, err := in.cfg.Index.NextSeq(w.ID); err == nil && next > 0 {
		cfg.Resume, cfg.ResumeFrom = true, next
	}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		h := &vllmHandler{ix: in.cfg.Index, id: w.ID}
		for ctx.Err() == nil {
			err := kvevents.Subscribe(ctx, cfg, h)
			if ctx.Err() == nil {
				in.cfg.Logger.Warn("vllm kv events stopped, restarting", "worker", w.ID, "err", err)
				cfg.Resume = false
			}
		}
	}()
}

// vllmHandler applies ZeroMQ batches. These engines cannot dump, so a gap
// clears what the index knows of the worker and continues after it.
type vllmHandler struct {
	ix  *radix.Index
	id  string
	evs []radix.Event
}

func (h *vllmHandler) HandleBatch(seq uint64, b *kvevents.Batch) error {
	h.evs = h.evs[:0]
	for _, e := range b.Events {
		switch e.Kind {
		case kvevents.KindStored:
			h.evs = append(h.evs, radix.Event{Kind: radix.Stored, Tier: e.Stored.Tier, Hashes: e.Stored.Hashes,
				Parent: e.Stored.Parent, HasParent: e.Stored.HasParent})
		case kvevents.KindRemoved:
			h.evs = append(h.evs, radix.RemovedEvent(e.Removed.Tier, e.Removed.Hashes...))
		case kvevents.KindCleared:
			h.evs = append(h.evs, radix.ClearedEvent())
		}
	}
	err := h.ix.ApplyBatch(h.id, seq, h.evs)
	switch {
	case errors.Is(err, radix.ErrSeqGap):
		// First batch after start (nothing to resume) or a gap: start over
		// from an empty cache at this sequence.
		if err := h.ix.Resync(h.id, seq-1, nil); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		return h.ix.ApplyBatch(h.id, seq, h.evs)
	case errors.Is(err, radix.ErrSeqStale):
		return nil
	}
	return err
}

func (h *vllmHandler) HandleGap(g kvevents.Gap) error {
	// Batches [From, To) are lost: forget the worker's blocks and expect To.
	return h.ix.Resync(h.id, g.To-1, nil)
}
