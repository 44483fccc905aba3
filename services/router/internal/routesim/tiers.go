package routesim

import (
	"container/heap"
	"container/list"
	"fmt"
	"time"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/radix"
)

// Lower KV tiers, as a worker with libs/kvbm tiers has them: a block the
// pool commits is copied into every lower tier (at once: offload is
// asynchronous on a live worker and off the request path), each tier
// keeps its most recently stored blocks up to its capacity, and a prompt
// whose prefix continues in a tier waits in its queue place while those
// blocks load, BlockTime each, then finds them cached, as the engine's
// onboarding does. A tier whose BlockTime is not less than the time to
// recompute a block is not loaded from, as the engine decides from its
// measurements. Every change reaches the router's index with its tier.

// TierConfig is one simulated tier below each worker's pool.
type TierConfig struct {
	Tier      kvtier.Tier   // kvtier.Host, kvtier.Disk or kvtier.External
	Blocks    int           // capacity per worker, or in all for a shared tier
	BlockTime time.Duration // to load one block into the pool
	// Shared makes one tier for all workers (an object store): what any
	// worker offloads, every worker can load, and the router sees every
	// worker holding it.
	Shared bool
}

// Tier profiles: the load time of a 2 MiB block (16 tokens of fp16
// Llama-3-8B KV).
var (
	// ProfileH100: an H100 node, host memory over PCIe at an effective
	// 25 GB/s, a local NVMe SSD at 6 GB/s, an object store over a 100 Gb/s
	// NIC at an effective 5 GB/s.
	ProfileH100 = map[kvtier.Tier]time.Duration{kvtier.Host: 84 * time.Microsecond, kvtier.Disk: 350 * time.Microsecond, kvtier.External: 420 * time.Microsecond}
	// ProfileLocal: this project's 2-vCPU test machine as measured by
	// libs/kvbm's benchmarks (host Get 5.73 GB/s, disk Get 1.56 GB/s) and
	// FACTS' versitygw GET over loopback (about 0.45 GB/s).
	ProfileLocal = map[kvtier.Tier]time.Duration{kvtier.Host: 366 * time.Microsecond, kvtier.Disk: 1344 * time.Microsecond, kvtier.External: 4660 * time.Microsecond}
)

// simTier is one worker's tier: an LRU set of block hashes.
type simTier struct {
	cfg   TierConfig
	order *list.List // front: most recent; values are hashes
	where map[uint64]*list.Element
}

func newSimTier(c TierConfig) *simTier {
	return &simTier{cfg: c, order: list.New(), where: map[uint64]*list.Element{}}
}

// put stores hash (or refreshes it), appending the index changes to evs.
func (t *simTier) put(hash uint64, evs []radix.Event) []radix.Event {
	if e, ok := t.where[hash]; ok {
		t.order.MoveToFront(e)
		return evs
	}
	if t.order.Len() >= t.cfg.Blocks {
		old := t.order.Back()
		h := old.Value.(uint64)
		t.order.Remove(old)
		delete(t.where, h)
		evs = append(evs, radix.RemovedEvent(t.cfg.Tier, h))
	}
	t.where[hash] = t.order.PushFront(hash)
	return append(evs, radix.StoredEvent(t.cfg.Tier, hash))
}

// run returns how many of the leading hashes the tier holds, refreshing
// them.
func (t *simTier) run(hashes []uint64) int {
	for n, h := range hashes {
		e, ok := t.where[h]
		if !ok {
			return n
		}
		t.order.MoveToFront(e)
	}
	return len(hashes)
}

// offload copies the worker's newly committed blocks into its tiers and
// tells the index.
func (s *replay) offload(w *worker) error {
	if len(w.tiers) == 0 {
		return nil
	}
	idle := w.kv.TakeCommitted()
	if len(idle) == 0 {
		return nil
	}
	s.revs = s.revs[:0]
	var shared []radix.Event
	for _, ib := range idle {
		for _, t := range w.tiers {
			if t.cfg.Shared {
				shared = t.put(ib.Hash, shared)
			} else {
				s.revs = t.put(ib.Hash, s.revs)
			}
		}
	}
	if err := s.index.Apply(w.name, s.revs...); err != nil {
		return fmt.Errorf("routesim: worker %s tier events: %w", w.name, err)
	}
	if len(shared) == 0 {
		return nil
	}
	// The store is one holder every worker can load from, as the
	// kvbm-controller's catalog stream makes it for the live router.
	if err := s.index.Apply(s.sharedHolder, shared...); err != nil {
		return fmt.Errorf("routesim: shared tier events: %w", err)
	}
	return nil
}

// recomputeBlockTime is the timing model's time to prefill one block, in
// a step full of prompt: what onboarding weighs a tier's load against.
func (s *replay) recomputeBlockTime() time.Duration {
	budget := s.batchTokens
	bs := s.workers[0].kv.BlockSize()
	b := executor.Batch{PrefillTokens: budget, TotalBlocks: s.workers[0].kv.NumBlocks()}
	return s.cfg.Timing.StepTime(&b) * time.Duration(bs) / time.Duration(budget)
}

// onboard starts loading the blocks of seq's prompt that follow its
// cached prefix on worker dst from that worker's tiers, as the engine
// does when a request arrives and again when it reaches admission. It
// returns the channel that closes when they land (nil: nothing to load).
func (s *replay) onboard(seq *sched.Seq, dst int) <-chan struct{} {
	w := s.workers[dst]
	if len(w.tiers) == 0 {
		return nil
	}
	dk := w.kv
	bs := dk.BlockSize()
	n := (len(seq.Tokens) - 1) / bs
	if n <= 0 {
		return nil
	}
	hashes := seq.BlockHashes(bs)[:n]
	k, _ := dk.Probe(hashes)
	pos, took := k, time.Duration(0)
	var from [kvtier.Count]int
	for pos < n {
		m := 0
		for _, t := range w.tiers {
			if t.cfg.BlockTime >= s.recompute {
				continue
			}
			if m = t.run(hashes[pos:]); m > 0 {
				from[t.cfg.Tier] += m
				took += time.Duration(m) * t.cfg.BlockTime
				break
			}
		}
		if m == 0 {
			break
		}
		pos += m
	}
	got := pos - k
	if got == 0 {
		return nil
	}
	p := &pull{id: int(seq.ID), dst: dst, src: -1, seq: seq, ready: make(chan struct{}),
		parent: kvhash.Root, hashes: hashes[k:pos], tokens: seq.Tokens[k*bs : pos*bs]}
	if k > 0 {
		p.parent = hashes[k-1]
	}
	var err error
	if p.dstPins, err = dk.Acquire(hashes[:k]); err != nil {
		return nil // Probe just found them: unreachable
	}
	regs, err := dk.AllocateForImport(got)
	if err != nil { // no room to load into: prefill, as the engine does
		dk.Release(p.dstPins)
		return nil
	}
	for _, r := range regs {
		p.blocks = append(p.blocks, r.Block)
	}
	p.duration = took
	o := &s.res.Requests[p.id-1]
	for t, c := range from {
		s.res.Onboarded[t] += c
		o.Onboarded[t] += c
	}
	heap.Push(&s.events, event{at: s.now + p.duration, worker: dst, land: p})
	return p.ready
}
