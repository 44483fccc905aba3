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
	"slices"

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
	// Order is how a step's budget is shared among prompts (see
	// OrderFCFS and OrderShortest); empty means OrderFCFS.
	Order string
}

// Prefill orders.
const (
	// OrderFCFS gives each step's budget to running sequences in priority
	// then arrival order, then admits waiting ones in the same order:
	// vLLM's default. A long prompt ahead in the queue delays everything
	// behind it by its whole prefill.
	OrderFCFS = "fcfs"
	// OrderShortest gives each step's budget first to decodes (one token
	// each), then to prompts in priority then shortest-remaining order,
	// counting only what is left to compute (a prefix-cache hit makes a
	// prompt short), among running and waiting prompts alike: shortest
	// remaining processing time, which minimizes mean time to first token
	// for a work-conserving queue. Aging bounds how long a long prompt can
	// be passed: each step it has waited since it arrived takes one step's
	// budget off its remaining tokens in the comparison.
	OrderShortest = "shortest"
)

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
	step    uint64 // Schedule calls so far
	stats   Stats
	cands   []cand // scratch of scheduleShortest
	onAdmit AdmitHook
}

// AdmitHook is called once for each sequence when it reaches admission
// (first in line, the running cap leaving room), with the prompt blocks
// the cache holds for it then. A non-nil channel holds the sequence in
// its place, as Seq.Ready does, until it closes: the hook is copying in
// blocks the sequence's prefix found since it was queued (another
// request computed them meanwhile, or they reached a lower tier), and
// they are prefix-cache hits when it is admitted. Called with the
// scheduler's caller's lock held; it must not block.
type AdmitHook func(q *Seq, cached int) <-chan struct{}

// SetAdmitHook installs h (nil: none).
func (s *Scheduler) SetAdmitHook(h AdmitHook) { s.onAdmit = h }

// New returns a scheduler allocating from kv.
func New(cfg Config, kv *kvcache.Manager) (*Scheduler, error) {
	if cfg.MaxBatchTokens <= 0 || cfg.MaxRunning <= 0 || cfg.WatermarkBlocks < 0 || cfg.LongPrefillTokens < 0 {
		return nil, fmt.Errorf("sched: invalid config %+v", cfg)
	}
	if err := CheckOrder(cfg.Order); err != nil {
		return nil, fmt.Errorf("sched: %w", err)
	}
	if cfg.Order == "" {
		cfg.Order = OrderFCFS
	}
	return &Scheduler{cfg: cfg, kv: kv}, nil
}

// CheckOrder reports whether order names a prefill order ("" is
// OrderFCFS), for callers that check a flag before building a scheduler.
func CheckOrder(order string) error {
	switch order {
	case "", OrderFCFS, OrderShortest:
		return nil
	}
	return fmt.Errorf("unknown prefill order %q (want %s or %s)", order, OrderFCFS, OrderShortest)
}

// Add queues a new sequence.
func (s *Scheduler) Add(q *Seq) {
	s.arrival++
	q.arrival, q.arrivalStep = s.arrival, s.step
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
	s.step++
	p := &Plan{}
	budget := s.cfg.MaxBatchTokens
	limit := s.prefillLimit()
	if s.cfg.Order == OrderShortest {
		s.scheduleShortest(p, budget, limit)
		return p
	}
	budget = s.growRunning(p, budget, limit, false)
	if len(p.Preempted) == 0 {
		s.admit(p, budget, limit)
	}
	return p
}

// growRunning plans the running sequences' next chunks in running order
// and returns the budget left; with decodesOnly (OrderShortest's first
// pass) only those with one token left. A sequence short of blocks
// preempts from the back; once one preempted itself, everything after it
// is gone too. Under FCFS (not decodesOnly) a waiting sequence that
// arrived before a running one still prefilling is admitted ahead of it
// (Seq.Arrived): the later arrival reached the worker first and started,
// but first come, first served is by arrival, not by which request the
// network delivered first.
func (s *Scheduler) growRunning(p *Plan, budget, limit int, decodesOnly bool) int {
	admitting := !decodesOnly
	for i := 0; i < len(s.running) && budget > 0; i++ {
		q := s.running[i]
		prompt := len(q.Tokens)-q.computed > 1
		if decodesOnly && prompt {
			continue
		}
		if admitting && prompt {
			var ahead int
			ahead, budget, admitting = s.admitAhead(p, q, budget, limit)
			i += ahead // they went into running ahead of q
			if budget <= 0 {
				break
			}
		}
		chunk, ok := s.grow(p, q, budget, limit, s.lastRunning)
		if !ok {
			break
		}
		budget -= chunk
	}
	return budget
}

// admitAhead admits the waiting sequences that come before running q, as
// admit does (stopping at a head that is held or does not fit: then
// admitting is false). It returns how many went into running, the budget
// left, and whether later ones may still be admitted.
func (s *Scheduler) admitAhead(p *Plan, q *Seq, budget, limit int) (ahead, left int, admitting bool) {
	for budget > 0 && len(s.waiting) > 0 && before(s.waiting[0], q) {
		w := s.waiting[0]
		if w.held() {
			return ahead, budget, false
		}
		chunk, ok := s.admitOne(p, w, budget, limit)
		if !ok {
			return ahead, budget, false
		}
		s.waiting = s.waiting[1:]
		budget -= chunk
		if w.running { // else it failed, too large to ever run
			ahead++
		}
	}
	return ahead, budget, true
}

// grow plans running q's next chunk under budget and limit, taking blocks
// from victims (chosen by victim, nil when none may go) when they run
// short. It returns the chunk, 0 when q has nothing to compute or no block
// could be had, and false when q was itself the victim.
func (s *Scheduler) grow(p *Plan, q *Seq, budget, limit int, victim func(q *Seq) *Seq) (int, bool) {
	bs := s.kv.BlockSize()
	chunk := capChunk(len(q.Tokens)-q.computed, budget, limit)
	if chunk <= 0 {
		return 0, true
	}
	need := ceilDiv(q.computed+chunk, bs) - len(q.blocks)
	for need > s.kv.Available() {
		v := victim(q)
		if v == nil {
			// Take what is free; a sequence that cannot grow at all waits
			// for running ones to finish.
			chunk = min(chunk, (len(q.blocks)+s.kv.Available())*bs-q.computed)
			if chunk <= 0 {
				return 0, true
			}
			need = ceilDiv(q.computed+chunk, bs) - len(q.blocks)
			break
		}
		s.preempt(v)
		p.Preempted = append(p.Preempted, v)
		if v == q {
			return 0, false
		}
	}
	q.blocks, _ = s.kv.AppendAllocate(q.blocks, need)
	s.addItem(p, q, chunk)
	return chunk, true
}

// lastRunning is FCFS's victim: the lowest-priority, latest running
// sequence, which may be q itself.
func (s *Scheduler) lastRunning(*Seq) *Seq { return s.running[len(s.running)-1] }

// scheduleShortest plans a step under OrderShortest: decodes first, in
// running order (a decode short of a block preempts from the back, as
// under FCFS), then running and waiting prompts together by priority and
// aged remaining tokens. A prompt short of blocks preempts only running
// sequences that have no work in this step yet (never q itself, never
// anything planned, whose blocks the step is about to use), latest first,
// else takes the chunk that the free blocks allow.
func (s *Scheduler) scheduleShortest(p *Plan, budget, limit int) {
	budget = s.growRunning(p, budget, limit, true)
	cands := s.cands[:0]
	for _, q := range s.running {
		if left := len(q.Tokens) - q.computed; left > 1 && q.plannedAt != s.step {
			cands = append(cands, cand{q: q, key: s.agedKey(q, left)})
		}
	}
	if len(s.running) < s.cfg.MaxRunning { // else none could be admitted
		bs := s.kv.BlockSize()
		for _, q := range s.waiting {
			if !q.held() {
				cands = append(cands, cand{q, s.agedKey(q, len(q.Tokens)-s.orderHit(q, bs))})
			}
		}
	}
	unplanned := func(q *Seq) *Seq {
		for i := len(s.running) - 1; i >= 0; i-- {
			if v := s.running[i]; v != q && v.plannedAt != s.step {
				return v
			}
		}
		return nil
	}
	admitting := true
	// Take the candidates in order until the budget is spent: a selection,
	// not a sort, since a step's budget seldom reaches past the first few.
	for len(cands) > 0 && budget > 0 {
		i := 0
		for j := 1; j < len(cands); j++ {
			if cands[j].before(cands[i]) {
				i = j
			}
		}
		q := cands[i].q
		cands[i] = cands[len(cands)-1]
		cands = cands[:len(cands)-1]
		if q.running {
			chunk, _ := s.grow(p, q, budget, limit, unplanned)
			budget -= chunk
		} else if admitting = admitting && len(p.Preempted) == 0; admitting {
			// admitOne probes again: admissions before this one may have
			// evicted or referenced the blocks the ordering saw.
			chunk, ok := s.admitOne(p, q, budget, limit)
			if admitting = ok; ok {
				s.waiting, _ = remove(s.waiting, q)
				budget -= chunk
			}
		}
		if !admitting { // only running prompts may still get budget
			cands = slices.DeleteFunc(cands, func(c cand) bool { return !c.q.running })
		}
	}
	clear(cands[:cap(cands)])
	s.cands = cands[:0]
}

// before orders candidates: priority, then aged remaining tokens, then
// arrival.
func (c cand) before(d cand) bool {
	if c.q.Priority != d.q.Priority {
		return c.q.Priority > d.q.Priority
	}
	if c.key != d.key {
		return c.key < d.key
	}
	return c.q.arrival < d.q.arrival
}

// orderHit is how many of waiting q's tokens the prefix cache holds, for
// ordering only: probed again every reprobeSteps steps, so a long queue of
// long prompts costs a step a probe of each only now and then (admission
// probes exactly).
func (s *Scheduler) orderHit(q *Seq, bs int) int {
	if q.probedAt == 0 || s.step-q.probedAt >= reprobeSteps {
		matched, _ := s.kv.Probe(q.matchableHashes(bs))
		q.probedHit, q.probedAt = matched*bs, s.step
	}
	return q.probedHit
}

// reprobeSteps bounds how stale orderHit may be.
const reprobeSteps = 32

// cand is a prompt competing for a step's budget under OrderShortest.
type cand struct {
	q   *Seq
	key int // aged remaining tokens
}

// agedKey is q's remaining tokens less one step's budget for each step q
// has waited since it arrived.
func (s *Scheduler) agedKey(q *Seq, left int) int {
	return left - int(s.step-q.arrivalStep)*s.cfg.MaxBatchTokens
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
	q.plannedAt = s.step
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
// first that does not fit (strict FCFS within a priority) or is held
// (Seq.Ready).
func (s *Scheduler) admit(p *Plan, budget, limit int) {
	for len(s.waiting) > 0 && budget > 0 {
		q := s.waiting[0]
		if q.held() {
			return
		}
		chunk, ok := s.admitOne(p, q, budget, limit)
		if !ok {
			return
		}
		s.waiting = s.waiting[1:]
		budget -= chunk
	}
}

// admitOne moves waiting q to running with its first chunk planned, and
// returns the chunk. It probes the prefix cache for q's leading blocks
// (kvcache.Manager.Probe), only once the running cap leaves room. It
// reports false, leaving q waiting, when q does not fit now (running cap,
// free blocks, watermark). A q that cannot fit even alone is planned as
// Failed (chunk 0, true): the caller drops it from the waiting queue
// either way.
func (s *Scheduler) admitOne(p *Plan, q *Seq, budget, limit int) (int, bool) {
	if len(s.running) >= s.cfg.MaxRunning {
		return 0, false
	}
	bs := s.kv.BlockSize()
	hashes := q.matchableHashes(bs)
	matched, evictable := s.kv.Probe(hashes)
	if s.onAdmit != nil && !q.admitHooked {
		q.admitHooked = true
		if ready := s.onAdmit(q, matched); ready != nil {
			q.Ready = ready
			return 0, false
		}
	}
	hit := matched * bs
	chunk := capChunk(len(q.Tokens)-hit, budget, limit)
	need := ceilDiv(hit+chunk, bs) - matched
	left := s.kv.Available() - evictable - need
	if left < 0 || (left < s.cfg.WatermarkBlocks && len(s.running) > 0) {
		if len(s.running) == 0 && ceilDiv(len(q.Tokens), bs) > s.kv.NumBlocks() {
			p.Failed = append(p.Failed, q)
			return 0, true
		}
		return 0, false
	}
	blocks, err := s.kv.Acquire(hashes[:matched])
	if err == nil {
		blocks, err = s.kv.AppendAllocate(blocks, need)
	}
	if err != nil { // unreachable given the checks above; never lose q
		s.kv.Release(blocks)
		return 0, false
	}
	q.blocks, q.committed, q.computed, q.running = blocks, matched, hit, true
	if !q.admitted {
		q.admitted, q.cachedToks = true, min(hit, q.PromptLen)
		s.stats.PromptTokens += q.PromptLen
		s.stats.PrefixHitTokens += q.cachedToks
	}
	s.running = insert(s.running, q)
	s.addItem(p, q, chunk)
	return chunk, true
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
