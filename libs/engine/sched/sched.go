// Package sched is the engine's continuous-batching scheduler: pure logic
// over a kvcache.Manager, with no goroutines, clocks or I/O, so every
// decision is reproducible in a unit test.
//
// Each step it (1) gives every running sequence its next chunk, in priority
// then arrival order, under a per-step token budget (a decode is a chunk of
// one token; a long prompt is prefilled in chunks), preempting the
// lowest-priority, latest running sequence by recompute when blocks run
// out; then (2), if nothing was preempted, admits waiting sequences while
// the token budget, the running cap and a free-block watermark allow,
// reusing cached prefix blocks. A preempted sequence releases its blocks
// (its full blocks stay in the prefix cache, so the recompute is usually a
// prefix hit) and waits at its original arrival position. A request is
// never dropped: one that cannot fit even alone is reported as Failed.
package sched

import (
	"errors"
	"fmt"

	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/kvhash"
)

// ErrTooLarge is reported for a sequence that cannot fit in the whole KV
// pool even when nothing else runs.
var ErrTooLarge = errors.New("sched: sequence does not fit in the KV cache")

// Config bounds each step.
type Config struct {
	MaxBatchTokens int // token budget per step (prefill chunks + decodes)
	MaxRunning     int // cap on sequences holding blocks
	// WatermarkBlocks stay free after an admission so running sequences
	// can grow without immediate preemption.
	WatermarkBlocks int
	// LongPrefillTokens caps a sequence's prefill chunk in a step while
	// another sequence also has prompt left to compute (running or
	// waiting), so a short prompt is not queued behind every chunk of a
	// long one; the budget left over goes to the others. A lone prompt
	// still uses the whole budget. vLLM's long_prefill_token_threshold,
	// applied only under contention. 0 disables.
	LongPrefillTokens int
}

// Item is one sequence's work in a step: compute [Start, End), and sample
// the next token when End reaches the end of the known tokens.
type Item struct {
	Seq    *Seq
	Start  int
	End    int
	Sample bool
}

// Plan is one step's schedule.
type Plan struct {
	Items         []Item
	PrefillTokens int
	DecodeTokens  int
	Preempted     []*Seq
	Failed        []*Seq // cannot ever fit; finish them with ErrTooLarge
}

// Stats are cumulative counters.
type Stats struct {
	Preemptions     int
	PrefixHitTokens int // prompt tokens served from the cache at first admission
	PromptTokens    int // prompt tokens admitted (first admission only)
}

// Scheduler holds waiting and running sequences.
type Scheduler struct {
	cfg     Config
	kv      *kvcache.Manager
	waiting []*Seq
	running []*Seq
	arrival uint64
	stats   Stats
}

// New returns a scheduler allocating from kv.
func New(cfg Config, kv *kvcache.Manager) (*Scheduler, error) {
	if cfg.MaxBatchTokens <= 0 || cfg.MaxRunning <= 0 || cfg.WatermarkBlocks < 0 || cfg.LongPrefillTokens < 0 {
		return nil, fmt.Errorf("sched: invalid config %+v", cfg)
	}
	return &Scheduler{cfg: cfg, kv: kv}, nil
}

// Add queues a new sequence.
func (s *Scheduler) Add(q *Seq) {
	s.arrival++
	q.arrival = s.arrival
	s.waiting = insert(s.waiting, q)
}

// Abort removes q wherever it is and frees its blocks at once.
func (s *Scheduler) Abort(q *Seq) {
	s.waiting, _ = remove(s.waiting, q)
	s.Finish(q)
}

// Finish releases a finished sequence's blocks; its committed blocks stay
// in the prefix cache until evicted.
func (s *Scheduler) Finish(q *Seq) {
	if q.running {
		s.running, _ = remove(s.running, q)
		q.running = false
	}
	s.kv.Release(q.blocks)
	q.blocks, q.committed, q.computed = nil, 0, 0
}

// Waiting and Running count the queues.
func (s *Scheduler) Waiting() int { return len(s.waiting) }

// Running counts sequences holding blocks.
func (s *Scheduler) Running() int { return len(s.running) }

// Stats returns the cumulative counters.
func (s *Scheduler) Stats() Stats { return s.stats }

// Schedule plans the next step.
func (s *Scheduler) Schedule() *Plan {
	p := &Plan{}
	budget := s.cfg.MaxBatchTokens
	bs := s.kv.BlockSize()
	limit := s.prefillLimit()
	for i := 0; i < len(s.running) && budget > 0; i++ {
		q := s.running[i]
		chunk := capChunk(len(q.Tokens)-q.computed, budget, limit)
		if chunk <= 0 {
			continue
		}
		need := ceilDiv(q.computed+chunk, bs) - len(q.blocks)
		for need > s.kv.Available() {
			victim := s.running[len(s.running)-1]
			s.preempt(victim)
			p.Preempted = append(p.Preempted, victim)
			if victim == q {
				break
			}
		}
		if !q.running {
			break // q preempted itself: everything after it is gone too
		}
		q.blocks, _ = s.kv.AppendAllocate(q.blocks, need)
		s.addItem(p, q, chunk)
		budget -= chunk
	}
	if len(p.Preempted) == 0 {
		s.admit(p, budget, limit)
	}
	return p
}

// prefillLimit is this step's cap on a prefill chunk: LongPrefillTokens
// when more than one sequence has prompt (or recompute) tokens left (every
// waiting one, and running ones with more than the next decode token to
// compute), else 0 (no cap).
func (s *Scheduler) prefillLimit() int {
	if s.cfg.LongPrefillTokens == 0 {
		return 0
	}
	n := len(s.waiting)
	for _, q := range s.running {
		if len(q.Tokens)-q.computed > 1 {
			n++
		}
		if n > 1 {
			break
		}
	}
	if n > 1 {
		return s.cfg.LongPrefillTokens
	}
	return 0
}

// capChunk is the chunk for a sequence with left tokens to compute under
// the step's remaining budget and prefill limit (0: none).
func capChunk(left, budget, limit int) int {
	chunk := min(left, budget)
	if limit > 0 && left > 1 {
		chunk = min(chunk, limit)
	}
	return chunk
}

func (s *Scheduler) addItem(p *Plan, q *Seq, chunk int) {
	it := Item{Seq: q, Start: q.computed, End: q.computed + chunk}
	it.Sample = it.End == len(q.Tokens)
	if it.Start < q.PromptLen || chunk > 1 {
		p.PrefillTokens += chunk
	} else {
		p.DecodeTokens += chunk
	}
	p.Items = append(p.Items, it)
}

// admit moves waiting sequences to running, head first, stopping at the
// first that does not fit (strict FCFS within a priority).
func (s *Scheduler) admit(p *Plan, budget, limit int) {
	bs := s.kv.BlockSize()
	for len(s.waiting) > 0 && budget > 0 && len(s.running) < s.cfg.MaxRunning {
		q := s.waiting[0]
		hashes := q.matchableHashes(bs)
		matched, evictable := s.kv.Probe(hashes)
		hit := matched * bs
		chunk := capChunk(len(q.Tokens)-hit, budget, limit)
		need := ceilDiv(hit+chunk, bs) - matched
		left := s.kv.Available() - evictable - need
		if left < 0 || (left < s.cfg.WatermarkBlocks && len(s.running) > 0) {
			if len(s.running) == 0 && ceilDiv(len(q.Tokens), bs) > s.kv.NumBlocks() {
				s.waiting = s.waiting[1:]
				p.Failed = append(p.Failed, q)
				continue
			}
			return
		}
		s.waiting = s.waiting[1:]
		blocks, err := s.kv.Acquire(hashes[:matched])
		if err == nil {
			blocks, err = s.kv.AppendAllocate(blocks, need)
		}
		if err != nil { // unreachable given the checks above; never lose q
			s.kv.Release(blocks)
			s.waiting = insert(s.waiting, q)
			return
		}
		q.blocks, q.committed, q.computed, q.running = blocks, matched, hit, true
		if !q.admitted {
			q.admitted, q.cachedToks = true, min(hit, q.PromptLen)
			s.stats.PromptTokens += q.PromptLen
			s.stats.PrefixHitTokens += q.cachedToks
		}
		s.running = insert(s.running, q)
		s.addItem(p, q, chunk)
		budget -= chunk
	}
}

func (s *Scheduler) preempt(q *Seq) {
	s.running, _ = remove(s.running, q)
	q.running = false
	s.kv.Release(q.blocks)
	q.blocks, q.committed, q.computed = nil, 0, 0
	q.preemptions++
	s.stats.Preemptions++
	s.waiting = insert(s.waiting, q)
}

// Complete records that the plan ran: computed positions advance, newly
// full blocks are committed to the prefix cache, and sampled tokens (one
// per Sample item, in item order; nil entries for others are ignored) are
// appended. Items whose sequence was aborted meanwhile are skipped.
func (s *Scheduler) Complete(p *Plan, sampled []uint32) {
	bs := s.kv.BlockSize()
	for i, it := range p.Items {
		q := it.Seq
		if !q.running || q.computed != it.Start {
			continue
		}
		q.computed = it.End
		s.commitFull(q, bs)
		if it.Sample && i < len(sampled) {
			q.Tokens = append(q.Tokens, sampled[i])
		}
	}
}

// commitFull commits q's newly computed full blocks to the prefix cache,
// under the hashes q keeps for its tokens.
func (s *Scheduler) commitFull(q *Seq, bs int) {
	full := q.computed / bs
	if q.committed >= full {
		return
	}
	hashes := q.BlockHashes(bs)
	for k := q.committed; k < full; k++ {
		parent := kvhash.Root
		if k > 0 {
			parent = hashes[k-1]
		}
		s.kv.Commit(q.blocks[k], parent, hashes[k], q.Tokens[k*bs:(k+1)*bs])
	}
	q.committed = full
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
