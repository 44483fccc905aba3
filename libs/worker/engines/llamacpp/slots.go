package llamacpp

import (
	"context"
	"slices"
	"sync"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
)

// slots hands llama-server's slots to requests and mirrors what each one
// caches, turning every change of a mirror into KV events.
//
// A mirror holds only tokens the slot is known to cache: the common prefix
// it kept when a request was given to it, the prompt once the first token
// came back, and the prompt plus all but the last generated token when the
// request ended (llama-server decodes a sampled token only to sample the
// next). A stream cancelled or stopped by the worker may have left more in
// the slot; the mirror then claims less than the slot holds, never more.
//
// A block held by several slots is announced once (Stored when the first
// slot takes it, Removed when the last one drops it), so the journal is
// the set of blocks the engine caches, as the router indexes it.
type slots struct {
	bs int
	// journal is nil when KV events are off; the mirrors still pick slots.
	journal *kvevent.Journal

	mu sync.Mutex
	// epoch counts clears: a request that began before one must not
	// claim what the restarted engine never cached.
	epoch   uint64
	s       []slot
	refs    map[uint64]int // block hash -> slots holding it
	clock   uint64
	waiters []*waiter // by priority, then arrival
	busy    int
}

type slot struct {
	tokens []uint32
	hashes []uint64 // chain of tokens' full blocks
	busy   bool
	used   uint64 // clock at the last hand-out: least recently used goes first
}

type waiter struct {
	prompt   []uint32
	priority int
	got      chan grant // buffered
}

// grant is a slot handed to a waiter, the prompt tokens it keeps, and the
// epoch it was handed in.
type grant struct {
	id, keep int
	epoch    uint64
}

func newSlots(n, blockSize int, journal *kvevent.Journal) *slots {
	return &slots{bs: blockSize, journal: journal, s: make([]slot, n), refs: map[uint64]int{}}
}

// acquire waits for a free slot, takes the free one caching the most full
// blocks of prompt's prefix (the least recently used on a tie: an unused
// slot before one whose blocks would be lost for a token or two of
// reuse), and returns it with
// the number of prompt tokens the slot keeps, in the current epoch. The
// slot's mirror is cut to that prefix at once: llama-server discards the
// rest when it starts.
func (p *slots) acquire(ctx context.Context, prompt []uint32, priority int) (id, keep int, epoch uint64, err error) {
	p.mu.Lock()
	// A slot is free only while nobody waits: freeLocked hands it over.
	if id := p.bestLocked(prompt); id >= 0 {
		keep := p.takeLocked(id, prompt)
		epoch := p.epoch
		p.mu.Unlock()
		return id, keep, epoch, nil
	}
	w := &waiter{prompt: prompt, priority: priority, got: make(chan grant, 1)}
	at := len(p.waiters)
	for i, o := range p.waiters {
		if o.priority < priority {
			at = i
			break
		}
	}
	p.waiters = slices.Insert(p.waiters, at, w)
	p.mu.Unlock()
	select {
	case g := <-w.got:
		return g.id, g.keep, g.epoch, nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		return 0, 0, 0, ctx.Err()
	}
	// Handed a slot while giving up: pass it on. Its mirror was cut for
	// this prompt, which the engine never saw: it claims less than the
	// slot holds, as after a cancellation.
	g := <-w.got
	p.freeLocked(g.id)
	return 0, 0, 0, ctx.Err()
}

// bestLocked is the free slot to give prompt, or -1.
func (p *slots) bestLocked(prompt []uint32) int {
	best, bestLen := -1, -1
	for i := range p.s {
		s := &p.s[i]
		if s.busy {
			continue
		}
		n := commonPrefix(s.tokens, prompt) / p.bs
		if n > bestLen || n == bestLen && s.used < p.s[best].used {
			best, bestLen = i, n
		}
	}
	return best
}

// takeLocked marks slot id busy for prompt and cuts its mirror to the
// prefix it keeps.
func (p *slots) takeLocked(id int, prompt []uint32) int {
	s := &p.s[id]
	keep := commonPrefix(s.tokens, prompt)
	p.clock++
	s.busy, s.used = true, p.clock
	p.busy++
	p.setLocked(id, s.tokens[:keep])
	return keep
}

// cached records that slot id now caches tokens (a request's prompt, once
// its first token came back), unless a clear came since epoch.
func (p *slots) cached(id int, epoch uint64, tokens []uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch == p.epoch {
		p.setLocked(id, tokens)
	}
}

// release records what slot id caches after its request (nothing when a
// clear came since epoch) and frees it.
func (p *slots) release(id int, epoch uint64, tokens []uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch == p.epoch {
		p.setLocked(id, tokens)
	}
	p.freeLocked(id)
}

// freeLocked frees slot id, or hands it to the first waiter.
func (p *slots) freeLocked(id int) {
	p.s[id].busy = false
	p.busy--
	if len(p.waiters) == 0 {
		return
	}
	w := p.waiters[0]
	p.waiters = p.waiters[1:]
	best := p.bestLocked(w.prompt)
	w.got <- grant{id: best, keep: p.takeLocked(best, w.prompt), epoch: p.epoch}
}

// setLocked replaces slot id's mirror with tokens (copied) and publishes
// what changed.
func (p *slots) setLocked(id int, tokens []uint32) {
	s := &p.s[id]
	tokens = slices.Clone(tokens)
	n := len(tokens) / p.bs
	// The chains agree up to the first block whose tokens differ.
	same := min(len(s.hashes), n, commonPrefix(s.tokens, tokens)/p.bs)
	hashes := append(slices.Clone(s.hashes[:same]), kvhash.AppendBlockHashes(nil, parentOf(s.hashes, same), tokens[same*p.bs:n*p.bs], p.bs, 0)...)
	var events []kvevent.Event
	var gone []uint64
	for _, h := range s.hashes[same:] {
		if p.refs[h]--; p.refs[h] <= 0 {
			delete(p.refs, h)
			gone = append(gone, h)
		}
	}
	if len(gone) > 0 {
		events = append(events, kvevent.Event{Kind: kvevent.Removed, BlockHashes: gone, Tier: kvtier.Device})
	}
	first := -1
	for i := same; i < n; i++ {
		if p.refs[hashes[i]]++; p.refs[hashes[i]] == 1 && first < 0 {
			first = i
		}
	}
	if first >= 0 {
		events = append(events, kvevent.Event{
			Kind: kvevent.Stored, BlockHashes: slices.Clone(hashes[first:n]), ParentHash: parentOf(hashes, first),
			TokenIDs: slices.Clone(tokens[first*p.bs : n*p.bs]), BlockSize: p.bs, Tier: kvtier.Device,
		})
	}
	s.tokens, s.hashes = tokens, hashes
	if p.journal != nil {
		p.journal.Append(events)
	}
}

// clear forgets every mirror (the engine restarted with empty slots) and
// publishes one Cleared event.
func (p *slots) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.s {
		p.s[i].tokens, p.s[i].hashes = nil, nil
	}
	clear(p.refs)
	p.epoch++
	if p.journal != nil {
		p.journal.Append([]kvevent.Event{{Kind: kvevent.Cleared}})
	}
}

// dump is a Stored event per slot for the blocks no earlier slot holds,
// parents first, at the journal's sequence number.
func (p *slots) dump() kvevent.Batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[uint64]bool, len(p.refs))
	var events []kvevent.Event
	for i := range p.s {
		s := &p.s[i]
		first := len(s.hashes)
		for j, h := range s.hashes {
			if !seen[h] {
				first = j
				break
			}
		}
		if first == len(s.hashes) {
			continue
		}
		for _, h := range s.hashes[first:] {
			seen[h] = true
		}
		events = append(events, kvevent.Event{
			Kind: kvevent.Stored, BlockHashes: slices.Clone(s.hashes[first:]), ParentHash: parentOf(s.hashes, first),
			TokenIDs: slices.Clone(s.tokens[first*p.bs : len(s.hashes)*p.bs]), BlockSize: p.bs, Tier: kvtier.Device,
		})
	}
	var seq uint64
	if p.journal != nil {
		seq = p.journal.Last()
	}
	return kvevent.Batch{Seq: seq, Events: events}
}

// load is the slots in use, the requests waiting for one, and the blocks
// the mirrors hold (those of busy slots, and all).
func (p *slots) load() (busy, waiting, usedBlocks, cachedBlocks int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.s {
		if p.s[i].busy {
			usedBlocks += len(p.s[i].hashes)
		}
	}
	return p.busy, len(p.waiters), usedBlocks, len(p.refs)
}

func parentOf(hashes []uint64, i int) uint64 {
	if i == 0 {
		return kvhash.Root
	}
	return hashes[i-1]
}

func commonPrefix(a, b []uint32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
