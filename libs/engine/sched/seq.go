package sched

import (
	"slices"

	"switchyard.dev/libs/kvhash"
)

// Seq is one request's sequence as the scheduler sees it: tokens, how many
// of them have KV in the cache, and the blocks holding that KV.
type Seq struct {
	ID        uint64
	Tokens    []uint32 // prompt then generated tokens
	PromptLen int
	Priority  int    // higher runs first; ties go first come, first served
	Salt      uint64 // kvhash salt (LoRA or tenant key)
	// Ready, when set, holds the sequence in the waiting queue, in its
	// place, until it is closed: its leading KV blocks are being copied in
	// (a prefix pull) and will be prefix-cache hits once it closes. Under
	// OrderFCFS the sequences behind it wait too, as behind any head that
	// does not fit yet (running ones go on): vLLM passes such requests
	// over instead, but then a later arrival admitted in the copy's few
	// milliseconds takes the budget for its whole prefill, and a burst of
	// arrivals routinely pushes the pulled request back behind it
	// (docs/benchmarks/2026-12-01-routing-prefix-pull.md). Under
	// OrderShortest it is simply not a candidate until Ready closes.
	Ready <-chan struct{}
	// admitHooked: the scheduler's AdmitHook has seen the sequence.
	admitHooked bool
	// Arrived orders sequences of equal priority first come, first served
	// (Unix nanoseconds; 0 for all: the order of Add). The engine sets it
	// to the request's arrival in the serving system (the router's
	// decision, engine.Request.Arrival), which can precede the Add of a
	// sequence added earlier: requests routed a few milliseconds apart
	// reach a worker in either order. Under OrderFCFS such a sequence
	// takes the budget ahead of running sequences still prefilling that
	// arrived after it.
	Arrived int64

	arrival     uint64
	arrivalStep uint64 // Schedule calls before Add, for aging
	plannedAt   uint64 // the step whose plan last gave it work
	probedAt    uint64 // the step orderHit last probed the cache for it
	probedHit   int    // cached prompt tokens found then
	computed    int    // positions [0, computed) have KV
	blocks      []int  // blocks[p/blockSize] holds position p
	committed   int    // leading blocks committed to the prefix cache
	admitted    bool   // admitted at least once
	running     bool
	cachedToks  int // prompt tokens found in the prefix cache at first admission
	preemptions int

	// hashes caches the chained hashes of Tokens' leading full blocks,
	// computed under hashBlockSize and hashSalt (see BlockHashes).
	hashes        []uint64
	hashBlockSize int
	hashSalt      uint64
}

// held reports whether s waits for its Ready (clearing Ready once closed).
func (s *Seq) held() bool {
	if s.Ready == nil {
		return false
	}
	select {
	case <-s.Ready:
		s.Ready = nil
		return false
	default:
		return true
	}
}

// Computed is the number of leading tokens whose KV is cached.
func (s *Seq) Computed() int { return s.computed }

// Blocks is the sequence's block table (valid until the next Schedule).
func (s *Seq) Blocks() []int { return s.blocks }

// CachedPromptTokens is how many prompt tokens the first admission found in
// the prefix cache.
func (s *Seq) CachedPromptTokens() int { return s.cachedToks }

// Preemptions counts how often the sequence lost its blocks.
func (s *Seq) Preemptions() int { return s.preemptions }

// Running reports whether the sequence holds blocks.
func (s *Seq) Running() bool { return s.running }

// before orders sequences: higher priority, then earlier arrival.
func before(a, b *Seq) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Arrived != b.Arrived {
		return a.Arrived < b.Arrived
	}
	return a.arrival < b.arrival
}

// insert places s in q keeping the order of before.
func insert(q []*Seq, s *Seq) []*Seq {
	i := len(q)
	for i > 0 && before(s, q[i-1]) {
		i--
	}
	q = append(q, nil)
	copy(q[i+1:], q[i:])
	q[i] = s
	return q
}

func remove(q []*Seq, s *Seq) ([]*Seq, bool) {
	for i, x := range q {
		if x == s {
			return append(q[:i], q[i+1:]...), true
		}
	}
	return q, false
}

// BlockHashes returns the chained hashes (package kvhash) of the full
// blocks of Tokens under blockSize and Salt. They are cached: the prompt
// is hashed once, and later calls hash only the blocks that generated
// tokens have filled since. Preemption keeps them, since a preempted
// sequence keeps its tokens. Between calls Tokens may grow (the scheduler
// appends sampled tokens) or shrink (the hashes of blocks no longer full
// are dropped), but hashed tokens must not be rewritten, nor shortened and
// regrown, which would leave stale hashes. A change of blockSize or Salt
// rehashes from the start.
//
// Call it before Add to keep the prompt's hashing out of Schedule (and
// out of whatever lock guards the scheduler). The result is read-only and
// valid until Tokens next changes.
func (s *Seq) BlockHashes(blockSize int) []uint64 {
	if blockSize <= 0 {
		return nil
	}
	if blockSize != s.hashBlockSize || s.Salt != s.hashSalt {
		s.hashes, s.hashBlockSize, s.hashSalt = s.hashes[:0], blockSize, s.Salt
	}
	full := len(s.Tokens) / blockSize
	k := min(len(s.hashes), full)
	s.hashes = s.hashes[:k]
	if k < full {
		parent := kvhash.Root
		if k > 0 {
			parent = s.hashes[k-1]
		}
		s.hashes = kvhash.AppendBlockHashes(slices.Grow(s.hashes, full-k), parent, s.Tokens[k*blockSize:full*blockSize], blockSize, s.Salt)
	}
	return s.hashes
}

// matchableHashes returns the hashes of the full blocks that may be
// reused from the cache: never the block holding the last token, which
// must be computed to produce logits.
func (s *Seq) matchableHashes(blockSize int) []uint64 {
	n := max(len(s.Tokens)-1, 0) / blockSize
	return s.BlockHashes(blockSize)[:n]
}
