package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/kvbm"
)

// offloadCommitted hands the blocks committed since to the offloader, in
// commit order (a prefix's first block first: a prefix is only ever
// loaded from its start), as many as its queue takes, and keeps the rest
// in the backlog; e.mu held. It never waits.
func (e *Engine) offloadCommitted() {
	ts := e.tiers
	if ts == nil {
		return
	}
	ts.backlog = append(ts.backlog, e.kv.TakeCommitted()...)
	if n := e.kv.NumBlocks(); len(ts.backlog) > n { // the oldest are long evicted
		ts.backlog = slices.Delete(ts.backlog, 0, len(ts.backlog)-n)
	}
	sent := 0
	for _, ib := range ts.backlog {
		if len(ts.queue) == cap(ts.queue) {
			break
		}
		sent++
		if ts.offloaded[ib.ID] == ib.Hash || ts.heldEverywhere(ib.Hash) || !e.kv.Caches(ib.ID, ib.Hash) {
			continue // done already, or no longer cached
		}
		ts.offloaded[ib.ID] = ib.Hash
		ts.inflight++
		ts.queue <- ib // room checked above; only this goroutine sends, under e.mu
	}
	ts.backlog = slices.Delete(ts.backlog, 0, sent)
}

func (ts *tiers) heldEverywhere(hash uint64) bool {
	for _, lt := range ts.list {
		if _, ok := ts.mirror[lt.t.Kind()][hash]; !ok {
			return false
		}
	}
	return true
}

// stagedBlock is a block copied out of the arena for a slow tier.
type stagedBlock struct {
	m   kvbm.Meta
	buf []byte
}

// offloader copies queued blocks down until ctx ends, with a writer for
// each slow tier.
func (e *Engine) offloader(ctx context.Context) {
	ts := e.tiers
	var writers sync.WaitGroup
	defer writers.Wait()
	for _, lt := range ts.list {
		if lt.writes != nil {
			writers.Go(func() { e.writer(ctx, lt) })
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-ts.queue:
			e.offload(ctx, b)
		}
	}
}

// offload copies one arena block, if it is still cached, into every tier
// that lacks it and whose budget allows. The block is read under the
// engine's lock, which the loop does not hold while the executor
// computes, so no step waits on it and eviction cannot reuse the block
// mid-copy: straight into a memory tier, or into a staging buffer that
// the slower tier's writer then writes without the lock. Pinning the
// block instead would hold memory from admission and reorder the arena's
// LRU.
func (e *Engine) offload(ctx context.Context, ib kvcache.CommittedBlock) {
	ts := e.tiers
	off := ib.ID * ts.bb
	data := ts.arena[off : off+ts.bb]
	m := kvbm.Meta{Hash: ib.Hash, Parent: ib.Parent, Tokens: ib.Tokens}
	for _, lt := range ts.list {
		if lt.t.Prefix([]uint64{ib.Hash}) == 1 {
			continue
		}
		var buf []byte
		if lt.writes != nil {
			select {
			case buf = <-lt.bufs:
			default:
				ts.mu.Lock()
				lt.writeBehind++
				ts.mu.Unlock()
				continue
			}
		}
		if lt.budget != nil && !lt.budget.take(int64(ts.bb)) {
			if lt.writes != nil {
				lt.bufs <- buf
			}
			ts.mu.Lock()
			lt.overBudget++
			ts.mu.Unlock()
			continue
		}
		var stored bool
		var err error
		e.mu.Lock()
		cached := e.kv.Caches(ib.ID, ib.Hash)
		switch {
		case cached && lt.writes == nil:
			stored, err = lt.t.Put(ctx, m, data)
		case cached:
			if buf == nil {
				buf = make([]byte, ts.bb)
			}
			copy(buf, data)
			ts.writing++
			lt.writes <- stagedBlock{m, buf} // a buffer was free, so is a slot
			buf = nil
		}
		e.mu.Unlock()
		if !cached {
			if lt.writes != nil {
				lt.bufs <- buf
			}
			break // evicted before its turn
		}
		e.countOffload(lt, stored, err)
	}
	e.mu.Lock()
	ts.inflight--
	e.offloadCommitted() // the queue has room again
	e.flushEvents()
	e.mu.Unlock()
	e.signal() // a request may be waiting for the block's memory
}

// writer writes the blocks staged for slow tier lt until ctx ends.
func (e *Engine) writer(ctx context.Context, lt *lowerTier) {
	ts := e.tiers
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-lt.writes:
			stored, err := lt.t.Put(ctx, b.m, b.buf)
			lt.bufs <- b.buf
			e.countOffload(lt, stored, err)
			e.mu.Lock()
			ts.writing--
			e.flushEvents() // the tier's Stored
			e.mu.Unlock()
		}
	}
}

// countOffload counts one write into lt.
func (e *Engine) countOffload(lt *lowerTier, stored bool, err error) {
	if err != nil {
		e.log.Debug("kv offload failed", "tier", lt.t.Kind(), "err", err)
		return
	}
	if stored {
		e.tiers.mu.Lock()
		lt.offloaded++
		e.tiers.mu.Unlock()
	}
}

// tokenBucket is a write budget: rate bytes a second, bursting to one
// second's worth.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate int64) *tokenBucket {
	return &tokenBucket{rate: float64(rate), tokens: float64(rate), last: time.Now()}
}

func (b *tokenBucket) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < float64(n) {
		return false
	}
	b.tokens -= float64(n)
	return true
}

// offloadsDone reports whether every idle block has been offloaded (or
// passed over); for tests.
func (e *Engine) offloadsDone() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tiers == nil || (e.tiers.inflight == 0 && e.tiers.writing == 0 && len(e.tiers.backlog) == 0)
}
