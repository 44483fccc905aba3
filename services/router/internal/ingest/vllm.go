package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"switchyard.dev/libs/radix"
	"switchyard.dev/libs/vllmevents"
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
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		h := &vllmHandler{ix: in.cfg.Index, id: w.ID}
		r := retry{in: in}
		for ctx.Err() == nil {
			// Every (re)start resumes after what the index holds (a restored
			// snapshot's sequence at first), so the subscriber knows the
			// sequence it expects and reports an engine that restarted
			// meanwhile (its numbers start again) as a gap.
			cfg := vllmevents.Config{Endpoint: w.Endpoint, ReplayEndpoint: w.Replay, Topic: w.Topic, Logger: in.cfg.Logger.With("worker", w.ID)}
			if next, err := in.cfg.Index.NextSeq(w.ID); err == nil && next > 0 {
				cfg.Resume, cfg.ResumeFrom = true, next
			}
			start := time.Now()
			err := in.subscribe(ctx, cfg, h)
			if ctx.Err() != nil {
				return
			}
			// A subscription that fails at once (a handshake refused by
			// something that is not the engine) is retried with backoff.
			if time.Since(start) > in.cfg.MaxBackoff {
				r.reset()
			}
			if !r.wait(ctx, "vllm kv events stopped, restarting", err, "worker", w.ID) {
				return
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

func (h *vllmHandler) HandleBatch(seq uint64, b *vllmevents.Batch) error {
	h.evs = h.evs[:0]
	for _, e := range b.Events {
		switch e.Kind {
		case vllmevents.KindStored:
			h.evs = append(h.evs, radix.Event{Kind: radix.Stored, Tier: e.Stored.Tier, Hashes: e.Stored.Hashes,
				Parent: e.Stored.Parent, HasParent: e.Stored.HasParent})
		case vllmevents.KindRemoved:
			h.evs = append(h.evs, radix.RemovedEvent(e.Removed.Tier, e.Removed.Hashes...))
		case vllmevents.KindCleared:
			h.evs = append(h.evs, radix.ClearedEvent())
		}
	}
	err := h.ix.ApplyBatch(h.id, seq, h.evs)
	switch {
	case errors.Is(err, radix.ErrSeqGap):
		// First batch after start (nothing to resume) or a gap: start over
		// from an empty cache at this sequence.
		if err := h.startAt(seq); err != nil {
			return err
		}
		return h.ix.ApplyBatch(h.id, seq, h.evs)
	case errors.Is(err, radix.ErrSeqStale):
		return nil
	}
	return err
}

func (h *vllmHandler) HandleGap(g vllmevents.Gap) error {
	// Batches [From, To) are lost (or, with Restart, the engine started
	// over at To): forget the worker's blocks and expect To.
	return h.startAt(g.To)
}

// startAt empties the worker's entry and expects batch seq next.
func (h *vllmHandler) startAt(seq uint64) error {
	var err error
	if seq == 0 {
		err = h.ix.Reset(h.id, nil) // expects 0, as a new worker does
	} else {
		err = h.ix.Resync(h.id, seq-1, nil)
	}
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}
