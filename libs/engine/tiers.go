package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
)

// KV tiers below the arena (libs/kvbm): a block is copied down (offload)
// once it holds its KV and is cached, so that when the arena evicts it the
// block lives on in host memory, on disk or in a shared store, and a
// shared store has it for other workers as soon as possible;
// a prompt whose prefix continues in a lower tier has those blocks copied
// back into the arena (onboarding) while it keeps its place in the queue,
// as a prefix pull does, and is admitted with them cached.
//
// Neither direction blocks a step: offload copies each block on a
// goroutine of its own while the block is still cached (see offload);
// onboarding copies on a goroutine of the request's before it is
// admissible. The tiers' changes are journaled with
// the device's, under the engine's lock, so the router sees every tier
// exactly: the engine mirrors each lower tier's contents from its changes,
// and Dump reports them. A shared tier (kvtier.External) is the
// exception: it is one store for every worker of the model, so the
// kvbm-controller's catalog publishes it, once, and a worker's events and
// dump carry only its own tiers.

// TierConfig is one KV tier below the arena.
type TierConfig struct {
	// Open opens the tier for blocks of blockBytes, reporting its changes
	// to on. The engine closes it with itself.
	Open func(blockBytes int, on kvbm.OnChange) (kvbm.Tier, error)
	// WriteBytesPerSecond caps offload's writes into the tier (a disk's
	// write budget); a block over budget is not written there. 0: no cap.
	WriteBytesPerSecond int64
}

// TierMetrics is one lower tier's occupancy and traffic.
type TierMetrics struct {
	Tier             kvtier.Tier
	Blocks           int
	Capacity         int
	Offloaded        int64 // blocks written by offload
	OverBudget       int64 // blocks offload skipped for the write budget
	WriteBehind      int64 // blocks offload skipped: the tier's writes in flight were at their limit
	Onboarded        int64 // blocks copied into the arena
	OnboardBytes     int64
	RecomputeInstead int64 // blocks held here but recomputed, loading being slower
	Corrupt          int64 // blocks that failed their checksum
	LoadNanosPerBlk  int64 // measured load time of a block (moving average)
	// RecomputeNanosPerBlk is the measured prefill time of a block (the
	// engine's, moving average) that LoadNanosPerBlk is weighed against.
	RecomputeNanosPerBlk int64
}

// offloadQueue bounds the blocks handed to the offloader; the blocks
// behind them wait in the backlog. A block evicted before its turn is
// simply not offloaded.
const offloadQueue = 256

// writeDepth bounds the writes in flight to each tier slower than host
// memory, and the staging buffers (one block each) they are made from.
// Each such tier writes on a goroutine of its own, so a slow store never
// holds back offload into a fast tier: a block that finds its slow tier
// at the limit is not written there (WriteBehind).
const writeDepth = 8

// lowerTier is a tier with its policy and counters.
type lowerTier struct {
	t      kvbm.Tier
	budget *tokenBucket
	// A tier slower than host memory is written on its own goroutine:
	// writes carries staged blocks to it, bufs the free staging buffers
	// (nil until first used). Both nil for a host tier.
	writes chan stagedBlock
	bufs   chan []byte
	// Guarded by tiers.mu:
	offloaded, overBudget, writeBehind, onboarded, onboardBytes, recompute int64
	loadNanos                                                              float64 // EWMA per block; 0: not measured
}

// tiers is the engine's lower-tier state.
type tiers struct {
	list    []*lowerTier
	arena   []byte
	bb      int
	queue   chan kvcache.CommittedBlock
	pending []kvbm.Change  // changes reported, not yet journaled (guarded by mu)
	mu      sync.Mutex     // a leaf lock: nothing is acquired while it is held
	busy    sync.WaitGroup // onboarding copies in flight
	// Under the engine's lock:
	mirror    [kvtier.Count]map[uint64]uint64 // hash → parent, per tier
	offloaded map[int]uint64                  // arena block → the hash it had when offloaded
	backlog   []kvcache.CommittedBlock        // committed blocks not yet handed to the offloader
	inflight  int                             // blocks handed to the offloader, not yet done
	writing   int                             // blocks staged for slow tiers' writers, not yet written
	recompute float64                         // EWMA of a block's prefill time; 0: not measured
	replanned int64                           // requests whose onboarding was planned again at admission
}

func (e *Engine) openTiers(cfgs []TierConfig, blockBytes int) error {
	if len(cfgs) == 0 {
		return nil
	}
	if blockBytes == 0 {
		return errors.New("engine: KV tiers need KV bytes (a model executor, or a sim executor with KV bytes per token)")
	}
	ts := &tiers{arena: e.kv.Arena(), bb: blockBytes, queue: make(chan kvcache.CommittedBlock, offloadQueue), offloaded: map[int]uint64{}}
	for i := range ts.mirror {
		ts.mirror[i] = map[uint64]uint64{}
	}
	for _, c := range cfgs {
		t, err := c.Open(blockBytes, ts.changed)
		if err != nil {
			for _, lt := range ts.list {
				_ = lt.t.Close()
			}
			return fmt.Errorf("engine: KV tier: %w", err)
		}
		// A tier that moves blocks the nixl way reads them straight into
		// the arena once it is registered with it.
		if r, ok := t.(kvbm.Registrar); ok {
			if err := r.RegisterMemory(ts.arena); err != nil {
				_ = t.Close()
				for _, lt := range ts.list {
					_ = lt.t.Close()
				}
				return fmt.Errorf("engine: KV tier %v: %w", t.Kind(), err)
			}
		}
		lt := &lowerTier{t: t}
		if c.WriteBytesPerSecond > 0 {
			lt.budget = newTokenBucket(c.WriteBytesPerSecond)
		}
		if t.Kind() != kvtier.Host {
			lt.writes, lt.bufs = make(chan stagedBlock, writeDepth), make(chan []byte, writeDepth)
			for range writeDepth {
				lt.bufs <- nil
			}
		}
		ts.list = append(ts.list, lt)
	}
	e.kv.TrackCommitted()
	e.tiers = ts
	e.sched.SetAdmitHook(e.replan)
	return nil
}

// changed is every tier's OnChange.
func (ts *tiers) changed(c kvbm.Change) {
	ts.mu.Lock()
	ts.pending = append(ts.pending, c)
	ts.mu.Unlock()
}

// takeEvents turns the tiers' pending changes into events and applies
// them to the mirror; e.mu held.
func (ts *tiers) takeEvents(blockSize int) []kvevent.Event {
	ts.mu.Lock()
	pending := ts.pending
	ts.pending = nil
	ts.mu.Unlock()
	out := make([]kvevent.Event, 0, len(pending))
	for _, c := range pending {
		switch c.Kind {
		case kvbm.Stored:
			ts.mirror[c.Tier][c.Meta.Hash] = c.Meta.Parent
			if c.Tier == kvtier.External {
				continue // published by the kvbm-controller, once for every worker
			}
			// A chain offloaded block after block is one event, as the
			// arena reports its own.
			if k := len(out); k > 0 {
				last := &out[k-1]
				if last.Kind == kvevent.Stored && last.Tier == c.Tier && last.BlockHashes[len(last.BlockHashes)-1] == c.Meta.Parent &&
					len(last.TokenIDs) == len(last.BlockHashes)*blockSize && len(c.Meta.Tokens) == blockSize {
					last.BlockHashes = append(last.BlockHashes, c.Meta.Hash)
					last.TokenIDs = append(last.TokenIDs, c.Meta.Tokens...)
					continue
				}
			}
			out = append(out, kvevent.Event{Kind: kvevent.Stored, BlockHashes: []uint64{c.Meta.Hash}, ParentHash: c.Meta.Parent,
				TokenIDs: slices.Clone(c.Meta.Tokens), BlockSize: blockSize, Tier: c.Tier})
		case kvbm.Removed:
			delete(ts.mirror[c.Tier], c.Meta.Hash)
			if c.Tier == kvtier.External {
				continue
			}
			if k := len(out); k > 0 && out[k-1].Kind == kvevent.Removed && out[k-1].Tier == c.Tier {
				out[k-1].BlockHashes = append(out[k-1].BlockHashes, c.Meta.Hash)
				continue
			}
			out = append(out, kvevent.Event{Kind: kvevent.Removed, BlockHashes: []uint64{c.Meta.Hash}, Tier: c.Tier})
		}
	}
	return out
}

// snapshot returns a Stored event for every block the mirror holds in
// the worker's own tiers.
func (ts *tiers) snapshot(blockSize int) []kvevent.Event {
	var out []kvevent.Event
	for t := range ts.mirror {
		if kvtier.Tier(t) == kvtier.External {
			continue
		}
		for h, p := range ts.mirror[t] {
			out = append(out, kvevent.Event{Kind: kvevent.Stored, BlockHashes: []uint64{h}, ParentHash: p, BlockSize: blockSize, Tier: kvtier.Tier(t)})
		}
	}
	return out
}

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

// segment is a run of a prompt's blocks to load from one tier.
type segment struct {
	lt       *lowerTier
	from, to int // block indexes in the prompt
}

// onboard starts copying into the arena the blocks of r's prompt that
// follow its cached device prefix and that lower tiers hold, and sets
// r.Ready; the engine admits r once they are committed (or the copy
// failed: the rest is prefilled). Blocks whose load would take longer
// than recomputing them are left to the prefill. It returns without
// setting Ready when there is nothing to load.
func (e *Engine) onboard(ctx context.Context, r *Request) {
	ts, bs := e.tiers, e.cfg.BlockSize
	n := (len(r.Prompt) - 1) / bs // the last token's block is computed for its logits
	if n <= 0 {
		return
	}
	hashes := kvhash.BlockHashes(r.Prompt[:n*bs], bs, r.CacheSalt)
	e.mu.Lock()
	pinned := e.kv.Pin(hashes)
	k := len(pinned)
	// What is passed over here is counted at admission, where the
	// request is planned again (replan).
	segs, end, _ := ts.plan(hashes, k)
	if end == k {
		e.kv.Release(regionIDs(pinned))
		e.mu.Unlock()
		return
	}
	ready := e.startOnboard(ctx, segs, hashes, pinned, end, r.Prompt)
	e.mu.Unlock()
	if ready != nil {
		r.Ready = ready
	}
}

// replan is the scheduler's admission hook: a request reaching admission
// is planned again, since its prefix may have reached a lower tier since
// it was submitted (another request computed it while this one queued,
// here or, for the shared tier, on another worker). If more of it can be
// loaded than the arena holds now, it keeps its place while that is
// copied in; e.mu held.
func (e *Engine) replan(q *sched.Seq, cached int) <-chan struct{} {
	bs := e.cfg.BlockSize
	n := (q.PromptLen - 1) / bs
	if n <= cached {
		return nil
	}
	hashes := q.BlockHashes(bs)[:n]
	segs, end, skipped := e.tiers.plan(hashes, cached)
	if end == cached {
		e.tiers.countRecompute(skipped)
		return nil
	}
	pinned := e.kv.Pin(hashes)
	if k := len(pinned); k != cached { // the scheduler probed its own matchable blocks: plan from what is pinned
		segs, end, skipped = e.tiers.plan(hashes, k)
	}
	e.tiers.countRecompute(skipped)
	if end == len(pinned) {
		e.kv.Release(regionIDs(pinned))
		return nil
	}
	e.tiers.replanned++
	// The request's context is not the scheduler's to hold: a cancelled
	// request's load runs out (bounded by the tiers' deadlines) and its
	// blocks stay cached for others.
	return e.startOnboard(context.Background(), segs, hashes, pinned, end, q.Tokens[:q.PromptLen])
}

// startOnboard reserves arena blocks for hashes[len(pinned):end] and
// copies segs into them on a goroutine, returning the channel that
// closes when they are committed (nil, with pinned released, when the
// arena has no room: the request prefills). pinned holds the cached
// prefix in the arena until then; e.mu held.
func (e *Engine) startOnboard(ctx context.Context, segs []segment, hashes []uint64, pinned []kvcache.Region, end int, prompt []uint32) chan struct{} {
	ts, bs, k := e.tiers, e.cfg.BlockSize, len(pinned)
	regs, err := e.kv.AllocateForImport(end - k)
	if err != nil { // no room now: prefill as usual
		e.kv.Release(regionIDs(pinned))
		e.flushEvents()
		return nil
	}
	e.flushEvents() // blocks the allocation evicted
	ready := make(chan struct{})
	ts.busy.Add(1)
	go func() {
		defer ts.busy.Done()
		defer close(ready)
		loaded := e.load(ctx, segs, hashes, k, regs)
		parent := kvhash.Root
		if k > 0 {
			parent = hashes[k-1]
		}
		ids := regionIDs(regs)
		e.mu.Lock()
		defer e.mu.Unlock()
		if loaded > 0 {
			held, err := e.kv.CommitImported(ids[:loaded], parent, hashes[k:k+loaded], prompt[k*bs:(k+loaded)*bs])
			if err == nil {
				e.kv.Release(held)
				ids = ids[loaded:]
			} else {
				e.log.Warn("kv onboarding: commit failed; prefilling", "err", err)
			}
		}
		e.kv.Release(ids)
		e.kv.Release(regionIDs(pinned))
		e.flushEvents()
		e.signal()
	}()
	return ready
}

// plan finds, from block k on, the runs of hashes the lower tiers hold,
// fastest tier first at each point, stopping where no tier holds the next
// block or where the tier holding it loads slower than a recompute; e.mu
// held (for the recompute estimate). skipped counts, by tier, the blocks
// passed over as slower to load than to recompute: the caller whose
// decision is final records them (countRecompute), once.
func (ts *tiers) plan(hashes []uint64, k int) (segs []segment, end int, skipped [kvtier.Count]int64) {
	pos := k
	for pos < len(hashes) {
		var seg *segment
		for _, lt := range ts.list {
			if m := lt.t.Prefix(hashes[pos:]); m > 0 {
				if !ts.worthLoading(lt) {
					skipped[lt.t.Kind()] += int64(m)
					continue
				}
				seg = &segment{lt: lt, from: pos, to: pos + m}
				break
			}
		}
		if seg == nil {
			break
		}
		segs = append(segs, *seg)
		pos = seg.to
	}
	return segs, pos, skipped
}

// countRecompute records plan's skipped blocks.
func (ts *tiers) countRecompute(skipped [kvtier.Count]int64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, lt := range ts.list {
		lt.recompute += skipped[lt.t.Kind()]
	}
}

// worthLoading reports whether a block of lt loads faster than it is
// recomputed, as measured so far; unmeasured, it is tried.
func (ts *tiers) worthLoading(lt *lowerTier) bool {
	ts.mu.Lock()
	load := lt.loadNanos
	ts.mu.Unlock()
	return load == 0 || ts.recompute == 0 || load < ts.recompute
}

// load copies the planned segments into the import regions (regs[i] is
// prompt block k+i) and returns how many leading blocks landed. A block
// that is gone or fails its checksum ends the run: the rest is prefilled.
func (e *Engine) load(ctx context.Context, segs []segment, hashes []uint64, k int, regs []kvcache.Region) int {
	ts := e.tiers
	loaded := 0
	for _, s := range segs {
		for i := s.from; i < s.to; i++ {
			reg := regs[i-k]
			start := time.Now()
			_, err := s.lt.t.Get(ctx, hashes[i], ts.arena[reg.Offset:reg.Offset+reg.Length])
			took := time.Since(start)
			ts.mu.Lock()
			if err != nil { // gone, or corrupt (the tier counts it)
				ts.mu.Unlock()
				return loaded
			}
			s.lt.onboarded++
			s.lt.onboardBytes += int64(reg.Length)
			s.lt.loadNanos = ewma(s.lt.loadNanos, float64(took.Nanoseconds()))
			ts.mu.Unlock()
			loaded++
		}
	}
	return loaded
}

// observeStep feeds a step's prefill time into the recompute estimate;
// e.mu held.
func (ts *tiers) observeStep(prefillTokens, decodeTokens, blockSize int, took time.Duration) {
	if prefillTokens < blockSize {
		return
	}
	perBlock := float64(took.Nanoseconds()) / float64(prefillTokens+decodeTokens) * float64(blockSize)
	ts.recompute = ewma(ts.recompute, perBlock)
}

func ewma(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return 0.8*avg + 0.2*x
}

// metrics reports every tier; e.mu held (for the recompute estimate).
func (ts *tiers) metrics() []TierMetrics {
	out := make([]TierMetrics, 0, len(ts.list))
	for _, lt := range ts.list {
		s := lt.t.Stats()
		ts.mu.Lock()
		out = append(out, TierMetrics{
			Tier: lt.t.Kind(), Blocks: s.Blocks, Capacity: s.Capacity,
			Offloaded: lt.offloaded, OverBudget: lt.overBudget, WriteBehind: lt.writeBehind, Onboarded: lt.onboarded, OnboardBytes: lt.onboardBytes,
			RecomputeInstead: lt.recompute, Corrupt: int64(s.Corrupt), LoadNanosPerBlk: int64(lt.loadNanos),
			RecomputeNanosPerBlk: int64(ts.recompute),
		})
		ts.mu.Unlock()
	}
	return out
}

func (ts *tiers) close() error {
	var err error
	for _, lt := range ts.list {
		err = errors.Join(err, lt.t.Close())
	}
	return err
}

func regionIDs(regs []kvcache.Region) []int {
	ids := make([]int, len(regs))
	for i, r := range regs {
		ids[i] = r.Block
	}
	return ids
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
