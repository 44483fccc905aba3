package sched

import (
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

	arrival     uint64
	computed    int      // positions [0, computed) have KV
	blocks      []int    // blocks[p/blockSize] holds position p
	hashes      []uint64 // chained hashes of the committed full blocks
	admitted    bool     // admitted at least once
	running     bool
	cachedToks  int // prompt tokens found in the prefix cache at first admission
	preemptions int
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

// promptHashes returns the chained hashes of the full blocks that may be
// reused from the cache: never the block holding the last token, which
// must be computed to produce logits.
func (s *Seq) matchableHashes(blockSize int) []uint64 {
	n := (len(s.Tokens) - 1) / blockSize
	return kvhash.AppendBlockHashes(make([]uint64, 0, n), kvhash.Root, s.Tokens[:n*blockSize], blockSize, s.Salt)
}
