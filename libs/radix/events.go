package radix

import (
	"errors"
	"fmt"

	"switchyard.dev/libs/kvtier"
)

// EventKind says what an Event does.
type EventKind uint8

// The event kinds, mirroring vLLM's KV events.
const (
	// Stored: the worker now holds Hashes in Tier.
	Stored EventKind = iota + 1
	// Removed: the worker no longer holds Hashes in Tier.
	Removed
	// Cleared: the worker holds nothing any more, in any tier.
	Cleared
)

// Event is one change to a worker's cache.
type Event struct {
	Kind   EventKind
	Tier   kvtier.Tier // Stored and Removed
	Hashes []uint64    // Stored and Removed: chained block hashes, in order
	// Parent is the hash of the block before Hashes[0], when HasParent. The
	// index does not need it (chained hashes already encode the prefix) and
	// only validates nothing about it; it is carried so callers can pass
	// engine events through unchanged.
	Parent    uint64
	HasParent bool
}

// StoredEvent returns a Stored event of hashes in tier.
func StoredEvent(tier kvtier.Tier, hashes ...uint64) Event {
	return Event{Kind: Stored, Tier: tier, Hashes: hashes}
}

// RemovedEvent returns a Removed event of hashes in tier.
func RemovedEvent(tier kvtier.Tier, hashes ...uint64) Event {
	return Event{Kind: Removed, Tier: tier, Hashes: hashes}
}

// ClearedEvent returns a Cleared event.
func ClearedEvent() Event { return Event{Kind: Cleared} }

func (e *Event) validate() error {
	switch e.Kind {
	case Stored, Removed:
		if !e.Tier.Valid() {
			return fmt.Errorf("%w: tier %d", ErrInvalidEvent, e.Tier)
		}
	case Cleared:
	default:
		return fmt.Errorf("%w: kind %d", ErrInvalidEvent, e.Kind)
	}
	return nil
}

// Block is one block of a worker's dump: its hash and the tiers holding it.
type Block struct {
	Hash  uint64
	Tiers kvtier.Mask
}

// Sequence errors. A *SeqError wraps one of them.
var (
	// ErrSeqGap: batches were lost; resync the worker from a dump.
	ErrSeqGap = errors.New("radix: sequence gap")
	// ErrSeqStale: the batch was already applied (e.g. replayed); skip it.
	ErrSeqStale = errors.New("radix: stale sequence")
)

// SeqError reports a batch whose sequence number is not the expected one.
// Nothing of that batch was applied.
type SeqError struct {
	Worker    string
	Want, Got uint64
}

func (e *SeqError) Error() string {
	return fmt.Sprintf("%v: worker %q: want seq %d, got %d", e.Unwrap(), e.Worker, e.Want, e.Got)
}

// Unwrap returns ErrSeqGap or ErrSeqStale.
func (e *SeqError) Unwrap() error {
	if e.Got > e.Want {
		return ErrSeqGap
	}
	return ErrSeqStale
}

// ApplyBatch applies the batch with sequence number seq of worker name, in
// order. seq must be exactly the one the worker expects next (0 after
// AddWorker, the dump's seq+1 after Resync); otherwise nothing is applied
// and a *SeqError is returned. A batch with an invalid event is rejected
// whole, before anything is applied.
func (ix *Index) ApplyBatch(name string, seq uint64, events []Event) error {
	if err := validate(events); err != nil {
		return fmt.Errorf("apply batch %d of %q: %w", seq, name, err)
	}
	w, err := ix.lockWorker(name)
	if err != nil {
		return fmt.Errorf("apply batch %d: %w", seq, err)
	}
	defer w.mu.Unlock()
	if seq != w.next {
		return &SeqError{Worker: name, Want: w.next, Got: seq}
	}
	ix.applyLocked(w, events)
	w.next = seq + 1
	return nil
}

// Apply applies events of worker name without sequence checking, for
// sources that have no sequence numbers.
func (ix *Index) Apply(name string, events ...Event) error {
	if err := validate(events); err != nil {
		return fmt.Errorf("apply to %q: %w", name, err)
	}
	w, err := ix.lockWorker(name)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	defer w.mu.Unlock()
	ix.applyLocked(w, events)
	return nil
}

// Resync atomically replaces everything worker name holds with blocks (its
// dump taken at sequence number seq); ApplyBatch then expects seq+1.
// Matches see the worker's old blocks until the new ones are all in place.
func (ix *Index) Resync(name string, seq uint64, blocks []Block) error {
	return ix.resync("resync", name, blocks, seq+1)
}

// Reset replaces everything worker name holds with blocks, as Resync does,
// but leaves the worker without a sequence: NextSeq is 0 again, as after
// AddWorker. It is for the first part of a dump that is still arriving:
// matches already see those blocks, while nothing read from the index
// meanwhile (NextSeq, a Snapshot) claims a sequence the index does not yet
// reflect. Resync at the dump's sequence when the dump is complete.
func (ix *Index) Reset(name string, blocks []Block) error {
	return ix.resync("reset", name, blocks, 0)
}

// Resume says worker name's blocks now reflect its sequence number seq
// (a dump whose batches were applied as they came, now complete):
// ApplyBatch then expects seq+1. Its blocks are left as they are.
func (ix *Index) Resume(name string, seq uint64) error {
	w, err := ix.lockWorker(name)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	defer w.mu.Unlock()
	w.next = seq + 1
	return nil
}

func (ix *Index) resync(op, name string, blocks []Block, next uint64) error {
	for _, b := range blocks {
		if !b.Tiers.Valid() {
			return fmt.Errorf("%s %q: %w: block %#x tiers %#x", op, name, ErrInvalidEvent, b.Hash, b.Tiers)
		}
	}
	w, err := ix.lockWorker(name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer w.mu.Unlock()
	ix.replace(w, blocks)
	w.next = next
	return nil
}

func validate(events []Event) error {
	for i := range events {
		if err := events[i].validate(); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// applyLocked applies validated events; w.mu must be held.
func (ix *Index) applyLocked(w *worker, events []Event) {
	for i := range events {
		e := &events[i]
		if e.Kind == Cleared {
			ix.replace(w, nil)
			continue
		}
		o := op{ops: ix.setOps(), id: w.id, mask: e.Tier.Mask(), add: e.Kind == Stored}
		ix.updateAll(e.Hashes, &o)
	}
}
