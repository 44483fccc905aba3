package rehash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/vllmevents"
)

// ErrBlockSize is wrapped by the error HandleBatch returns for an event
// whose block size is not the configured one.
var ErrBlockSize = errors.New("rehash: engine block size differs from the worker's")

// Config configures a Rehasher.
type Config struct {
	// BlockSize is the worker's block size (its -block-size, what the
	// router hashes requests with); the engine must use the same.
	BlockSize int
	// EventBuffer is the number of batches the journal keeps for
	// subscribers to resume; 0 means 1024.
	EventBuffer int
	// Logger receives refusals and drops; nil discards them.
	Logger *slog.Logger
}

// Stats counts what a Rehasher did, since it was made.
type Stats struct {
	Batches        uint64 // engine batches handled
	StoredBlocks   uint64 // engine blocks re-hashed and kept
	RemovedBlocks  uint64 // engine blocks removed
	UnknownParent  uint64 // stored events dropped: parent never seen
	LoRA           uint64 // stored events dropped: a LoRA adapter's blocks
	ExtraKeys      uint64 // stored events dropped: extra_keys set
	Malformed      uint64 // stored events dropped: token count is not blocks × block size
	UnknownRemoved uint64 // removed engine blocks that were never kept
	Resyncs        uint64 // gaps or restarts that cleared everything
	BlockSizeDiffs uint64 // batches refused for their block size
}

// tierRefs counts, per tier, how many stores of a block are live.
type tierRefs [kvtier.Count]int32

func (r *tierRefs) zero() bool { return *r == tierRefs{} }

// engineBlock is a block under the engine's hash.
type engineBlock struct {
	ours uint64
	refs tierRefs
}

// ourBlock is a block under our hash, as a dump announces it.
type ourBlock struct {
	parent uint64 // our hash of the parent, kvhash.Root for a first block
	depth  int    // blocks before it in its sequence
	tokens []uint32
	refs   tierRefs
}

// Rehasher consumes an engine's decoded event batches (it is a
// vllmevents.Handler) and republishes them, re-hashed, into its journal.
type Rehasher struct {
	cfg     Config
	log     *slog.Logger
	journal *kvevent.Journal
	// subscribe follows the engine's socket (vllmevents.Subscribe; tests
	// replace it).
	subscribe func(context.Context, vllmevents.Config, vllmevents.Handler) error

	mu     sync.Mutex
	engine map[uint64]*engineBlock
	ours   map[uint64]*ourBlock
	out    []kvevent.Event // the batch being built
	stats  Stats
	warned map[string]bool // kinds of drop already logged at warning level
}

// New returns a Rehasher for an engine whose blocks hold cfg.BlockSize
// tokens. Its journal starts at a random sequence number, as the built-in
// engine's does, so a router holding a position from an earlier run of
// the worker dumps instead of resuming.
func New(cfg Config) (*Rehasher, error) {
	if cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("rehash: block size %d: must be positive", cfg.BlockSize)
	}
	if cfg.EventBuffer < 0 {
		return nil, fmt.Errorf("rehash: event buffer %d: must not be negative", cfg.EventBuffer)
	}
	if cfg.EventBuffer == 0 {
		cfg.EventBuffer = 1024
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rehasher{
		cfg: cfg, log: log,
		journal:   kvevent.NewJournalAfter(cfg.EventBuffer, kvevent.RandomStart()),
		subscribe: vllmevents.Subscribe,
		engine:    map[uint64]*engineBlock{}, ours: map[uint64]*ourBlock{}, warned: map[string]bool{},
	}, nil
}

// Subscribe reads the re-hashed batches numbered above after.
func (r *Rehasher) Subscribe(after uint64) *kvevent.Subscription { return r.journal.Subscribe(after) }

// EventSeq is the sequence number of the latest re-hashed batch.
func (r *Rehasher) EventSeq() uint64 { return r.journal.Last() }

// Stats returns the counters.
func (r *Rehasher) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Blocks returns how many distinct blocks (by our hash) are held.
func (r *Rehasher) Blocks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ours)
}

// HandleBatch re-hashes one engine batch and appends what changed as one
// journal batch. seq is the engine's sequence number, used only in logs:
// the journal numbers its own batches. It returns an error wrapping
// ErrBlockSize, after clearing, when an event's block size is wrong.
func (r *Rehasher) HandleBatch(seq uint64, b *vllmevents.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Batches++
	r.out = r.out[:0]
	for i := range b.Events {
		e := &b.Events[i]
		switch e.Kind {
		case vllmevents.KindStored:
			if e.Stored.BlockSize != r.cfg.BlockSize {
				r.stats.BlockSizeDiffs++
				r.out = r.out[:0]
				r.clearLocked()
				r.flushLocked()
				return fmt.Errorf("%w: engine batch %d stores %d-token blocks, the worker's -block-size is %d (start the engine with --block-size %d, SGLang with --page-size %d)",
					ErrBlockSize, seq, e.Stored.BlockSize, r.cfg.BlockSize, r.cfg.BlockSize, r.cfg.BlockSize)
			}
			r.storedLocked(seq, &e.Stored)
		case vllmevents.KindRemoved:
			r.removedLocked(&e.Removed)
		case vllmevents.KindCleared:
			r.clearLocked()
		}
	}
	r.flushLocked()
	return nil
}

// HandleGap clears everything: batches were lost (or the engine restarted),
// so blocks they removed could still be announced. Later events rebuild
// the state; their parents from before the gap are unknown, so they are
// dropped until the engine stores a sequence's first block again.
func (r *Rehasher) HandleGap(g vllmevents.Gap) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Resyncs++
	r.log.Warn("engine kv events lost, clearing re-hashed blocks", "from", g.From, "to", g.To, "restart", g.Restart, "blocks", len(r.ours))
	r.out = r.out[:0]
	r.clearLocked()
	r.flushLocked()
	return nil
}

// flushLocked appends the batch built so far, if any.
func (r *Rehasher) flushLocked() {
	if len(r.out) > 0 {
		r.journal.Append(r.out)
		r.out = nil // the journal keeps the slice
	}
}

// clearLocked forgets every block, announcing it with one Cleared event
// when anything was held.
func (r *Rehasher) clearLocked() {
	if len(r.engine) == 0 && len(r.ours) == 0 {
		return
	}
	clear(r.engine)
	clear(r.ours)
	r.out = append(r.out[:0], kvevent.Event{Kind: kvevent.Cleared})
}

// drop counts a dropped stored event and logs it: the first of each kind
// at warning level (it says something about the deployment), the rest at
// debug.
func (r *Rehasher) drop(kind string, counter *uint64, seq uint64, s *vllmevents.Stored) {
	*counter++
	args := []any{"reason", kind, "engine_seq", seq, "blocks", len(s.Hashes)}
	if !r.warned[kind] {
		r.warned[kind] = true
		r.log.Warn("engine kv event dropped (first of its kind; later ones are logged at debug level)", args...)
		return
	}
	r.log.Debug("engine kv event dropped", args...)
}
