package radix

import (
	"cmp"
	"maps"
	"slices"
)

// WorkerState is one worker's full state, as captured by Dump and stored
// in snapshots.
type WorkerState struct {
	// Next is the sequence number ApplyBatch expects next.
	Next uint64
	// Blocks are the worker's blocks, sorted by hash, each listed once.
	Blocks []Block
}

// Dump returns every worker's state, keyed by external id. It is a
// consistent cut: all workers' writers are paused while it scans (readers
// are not). It is meant for snapshots and tests, not hot paths.
func (ix *Index) Dump() map[string]WorkerState {
	v := ix.view.Load()
	names := slices.Sorted(maps.Keys(v.byName))
	// Lock in name order; only Dump takes more than one worker lock, and
	// all Dumps use the same order, so this cannot deadlock.
	byID := map[uint32]string{}
	var locked []*worker
	for _, name := range names {
		w := v.byName[name]
		w.mu.Lock()
		if w.gone {
			w.mu.Unlock()
			continue
		}
		locked = append(locked, w)
		byID[w.id] = name
	}
	defer func() {
		for _, w := range locked {
			w.mu.Unlock()
		}
	}()
	out := make(map[string]WorkerState, len(locked))
	blocks := map[string][]Block{}
	for i := range ix.shards {
		ix.shards[i].scan(func(h uint64, _ *slot, set *holderSet) {
			for _, hd := range set.hs {
				if name, ok := byID[hd.id()]; ok {
					blocks[name] = append(blocks[name], Block{Hash: h, Tiers: hd.mask()})
				}
			}
		})
	}
	for _, w := range locked {
		bs := blocks[w.name]
		slices.SortFunc(bs, func(a, b Block) int { return cmp.Compare(a.Hash, b.Hash) })
		out[w.name] = WorkerState{Next: w.next, Blocks: bs}
	}
	return out
}

// Equal reports whether ix and other hold the same workers, sequence
// numbers and blocks. It is meant for tests.
func (ix *Index) Equal(other *Index) bool {
	return maps.EqualFunc(ix.Dump(), other.Dump(), func(a, b WorkerState) bool {
		return a.Next == b.Next && slices.Equal(a.Blocks, b.Blocks)
	})
}

// Stats describes the index's size.
type Stats struct {
	Workers  int // registered workers
	Blocks   int // distinct block hashes held by anyone
	Holdings int // (worker, block) pairs
	Slots    int // table capacity, in slots of 16 bytes
	BigSets  int // blocks whose holder set carries bitmaps
}

// Stats scans the index. It pauses no one but costs O(slots).
func (ix *Index) Stats() Stats {
	st := Stats{Workers: len(ix.view.Load().byName)}
	for i := range ix.shards {
		s := &ix.shards[i]
		if t := s.tab.Load(); t != nil {
			st.Slots += len(t.slots)
		}
		s.scan(func(_ uint64, _ *slot, set *holderSet) {
			st.Blocks++
			st.Holdings += len(set.hs)
			if set.cum != nil {
				st.BigSets++
			}
		})
	}
	return st
}

// DumpWorker is Dump for one worker, and false when the index does not
// follow it. It scans the whole index: an operator's view, not a hot
// path.
func (ix *Index) DumpWorker(name string) (WorkerState, bool) {
	w, ok := ix.view.Load().byName[name]
	if !ok {
		return WorkerState{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone {
		return WorkerState{}, false
	}
	var bs []Block
	for i := range ix.shards {
		ix.shards[i].scan(func(h uint64, _ *slot, set *holderSet) {
			for _, hd := range set.hs {
				if hd.id() == w.id {
					bs = append(bs, Block{Hash: h, Tiers: hd.mask()})
				}
			}
		})
	}
	slices.SortFunc(bs, func(a, b Block) int { return cmp.Compare(a.Hash, b.Hash) })
	return WorkerState{Next: w.next, Blocks: bs}, true
}
