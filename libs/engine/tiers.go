package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvbm"
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
