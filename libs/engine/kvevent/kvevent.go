// Package kvevent describes changes to a worker's KV cache and keeps a
// bounded, sequence-numbered history of them.
//
// The router builds its prefix index from these events, so the stream must
// be gap-free or say when it is not: every batch (one per scheduler step
// that changed the cache) gets the next sequence number, a subscriber
// resumes after the last number it saw, and one that fell off the replay
// buffer gets ErrGap and should ask for a dump (Stored events for every
// cached block, parents before children, tagged with the current number).
//
// A worker's journal starts each run at a random sequence number (as TCP
// picks a random initial sequence number per connection): a subscriber
// holding a position from an earlier run of the same worker (a router
// restored from a snapshot while the worker restarted) then finds it
// outside the new run's history, gets ErrGap or a refusal for a position
// ahead of the latest batch, and takes a dump, instead of resuming
// inside a history it never saw and keeping the dead process's blocks.
package kvevent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"switchyard.dev/libs/kvtier"
)

// Kind says what happened to the blocks of an event.
type Kind uint8

// Event kinds.
const (
	Stored Kind = iota + 1
	Removed
	Cleared
)

func (k Kind) String() string {
	switch k {
	case Stored:
		return "stored"
	case Removed:
		return "removed"
	case Cleared:
		return "cleared"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one change. Stored carries a chain of blocks: BlockHashes[0]'s
// parent is ParentHash (kvhash.Root for a sequence's first block) and each
// later hash's parent is the one before it; TokenIDs holds BlockSize tokens
// per hash. Removed carries hashes and the tier; Cleared only its kind.
// Tier is where the blocks live: kvtier.Device for the engine's own KV
// arena (GPU memory on a real GPU worker).
type Event struct {
	Kind        Kind
	BlockHashes []uint64
	ParentHash  uint64
	TokenIDs    []uint32
	BlockSize   int
	Tier        kvtier.Tier
}

// Batch is the events of one step under one sequence number.
type Batch struct {
	Seq    uint64
	Events []Event
}

// ErrGap reports that the requested history is no longer buffered.
var ErrGap = errors.New("kvevent: events were dropped from the replay buffer; take a dump")

// Journal numbers batches and keeps the last capacity of them. It is safe
// for concurrent use.
type Journal struct {
	mu      sync.Mutex
	buf     []Batch // ring, oldest at start
	start   int
	n       int
	start0  uint64 // the sequence number before the first batch
	last    uint64
	changed chan struct{}
}

// NewJournal returns an empty journal keeping at most capacity batches,
// numbering its first batch 1.
func NewJournal(capacity int) *Journal {
	return NewJournalAfter(capacity, 0)
}

// NewJournalAfter returns an empty journal whose first batch is numbered
// start+1.
func NewJournalAfter(capacity int, start uint64) *Journal {
	return &Journal{buf: make([]Batch, max(capacity, 1)), start0: start, last: start, changed: make(chan struct{})}
}

// RandomStart returns a random sequence number to start a run's journal
// after: at least 1 (0 stays "never seen" for subscribers) and below 2^62,
// so a run never wraps. Two runs' histories overlap with a probability of
// about their length over 2^62.
func RandomStart() uint64 {
	return 1 + rand.Uint64N(1<<62-1)
}

// Append records events as the next batch and returns its sequence number.
// An empty slice records nothing and returns the current number.
func (j *Journal) Append(events []Event) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(events) == 0 {
		return j.last
	}
	j.last++
	b := Batch{Seq: j.last, Events: events}
	if j.n < len(j.buf) {
		j.buf[(j.start+j.n)%len(j.buf)] = b
		j.n++
	} else {
		j.buf[j.start] = b
		j.start = (j.start + 1) % len(j.buf)
	}
	close(j.changed)
	j.changed = make(chan struct{})
	return j.last
}

// Last returns the sequence number of the newest batch (the start before
// any).
func (j *Journal) Last() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// Since returns the buffered batches numbered above after, or ErrGap when
// some of them were already dropped.
func (j *Journal) Since(after uint64) ([]Batch, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out, _, err := j.sinceLocked(after)
	return out, err
}

func (j *Journal) sinceLocked(after uint64) ([]Batch, <-chan struct{}, error) {
	if after == 0 {
		after = j.start0
	}
	if after >= j.last {
		return nil, j.changed, nil
	}
	oldest := j.last - uint64(j.n) + 1
	if after+1 < oldest {
		return nil, nil, fmt.Errorf("%w: resume after %d, oldest buffered is %d", ErrGap, after, oldest)
	}
	skip := int(after + 1 - oldest)
	out := make([]Batch, 0, j.n-skip)
	for i := skip; i < j.n; i++ {
		out = append(out, j.buf[(j.start+i)%len(j.buf)])
	}
	return out, j.changed, nil
}

// Subscription reads batches in order from a journal.
type Subscription struct {
	j       *Journal
	after   uint64
	pending []Batch
}

// Subscribe starts reading after sequence number after (0 for everything
// since the journal's start, if all of it is still buffered).
func (j *Journal) Subscribe(after uint64) *Subscription {
	return &Subscription{j: j, after: after}
}

// Next blocks until the next batch, ctx is done, or the subscriber fell
// behind the buffer (ErrGap; resubscribe from a dump's sequence number).
func (s *Subscription) Next(ctx context.Context) (Batch, error) {
	for len(s.pending) == 0 {
		s.j.mu.Lock()
		got, changed, err := s.j.sinceLocked(s.after)
		s.j.mu.Unlock()
		if err != nil {
			return Batch{}, err
		}
		if len(got) > 0 {
			s.pending = got
			break
		}
		select {
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		case <-changed:
		}
	}
	b := s.pending[0]
	s.pending = s.pending[1:]
	s.after = b.Seq
	return b, nil
}
