package engine

import (
	"context"
	"time"

	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
)

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

func regionIDs(regs []kvcache.Region) []int {
	ids := make([]int, len(regs))
	for i, r := range regs {
		ids[i] = r.Block
	}
	return ids
}
