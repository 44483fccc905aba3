package radix

import (
	"math/bits"

	"switchyard.dev/libs/kvtier"
)

// WorkerMatch is one worker's matched prefix.
type WorkerMatch struct {
	Worker string
	// Depth[t] is the number of leading blocks the worker holds, each in
	// some tier no slower than t. So Depth[kvtier.Device] counts the prefix
	// already in GPU memory, and Depth[kvtier.External] the prefix available
	// anywhere; a router can weight the differences. Depth is non-decreasing
	// in t and Depth[kvtier.External] >= 1 for every reported worker.
	Depth [kvtier.Count]int
}

// Result holds the outcome of a Match. Reuse one Result across calls (one
// per goroutine) so Match allocates nothing once the buffers have grown.
type Result struct {
	// Workers lists every worker holding at least the first block, in no
	// particular order. It is overwritten by the next MatchInto.
	Workers []WorkerMatch
	// Longest is the largest Depth[kvtier.External]: the leading blocks that
	// some single worker holds.
	Longest int

	// Scratch, indexed by dense id. act[t] has bit id set while worker id
	// still holds every block so far in a tier no slower than t; nxt is the
	// next step's act under construction. Between calls act is all zero.
	act, nxt [kvtier.Count][]uint64
	depth    [][kvtier.Count]int32
	ids      []uint32
	touch    uint32 // sink that keeps look-ahead loads from being elided
}

// Match returns the matched prefix depths for the chained block hashes of
// a request. It allocates; hot paths use MatchInto.
func (ix *Index) Match(hashes []uint64) *Result {
	r := new(Result)
	ix.MatchInto(r, hashes)
	return r
}

// matchAttempts bounds how often MatchInto restarts because a whole-worker
// operation (Cleared, Resync, RemoveWorker) was published while it walked.
const matchAttempts = 8

// MatchInto is Match writing into r. It never blocks: it reads the tables
// through atomic loads while writers keep going, so a concurrent batch may
// be seen partly applied. Whole-worker operations are seen atomically: if
// one is published during the walk (the view changed), the walk restarts,
// at most matchAttempts times.
func (ix *Index) MatchInto(r *Result, hashes []uint64) {
	for range matchAttempts {
		v := ix.view.Load()
		ix.walk(r, v, hashes)
		if ix.view.Load() == v {
			return
		}
	}
}

func (ix *Index) walk(r *Result, v *view, hashes []uint64) {
	r.Workers = r.Workers[:0]
	r.Longest = 0
	if len(hashes) == 0 {
		return
	}
	first := ix.lookup(hashes[0])
	if first == nil {
		return
	}
	r.grow(len(v.names))
	lo, hi := r.seed(v, first)
	if lo > hi {
		return
	}
	n := 1
walk:
	for n < len(hashes) {
		// Look up a window of blocks before using any of them. First touch
		// every home slot with loads that nothing branches on, so all the
		// window's cache misses are in flight together; then probe. (A
		// rolling touch of block n+lookAhead is slower: the pending load
		// blocks retirement and stalls the steps behind it.) At most
		// lookAhead-1 lookups are wasted past the end of the match.
		var sets [lookAhead]*holderSet
		var ms [lookAhead]uint64
		end := min(n+lookAhead, len(hashes))
		var sink uint64
		for j := n; j < end; j++ {
			m := mix(hashes[j])
			ms[j-n] = m
			if t := ix.shardOf(m).tab.Load(); t != nil {
				sink ^= t.slots[m&t.mask].key.Load()
			}
		}
		r.touch ^= uint32(sink)
		for j := n; j < end; j++ {
			m := ms[j-n]
			sets[j-n] = ix.shardOf(m).tab.Load().find(hashes[j], m)
		}
		for j := n; j < end; j++ {
			if s := sets[j-n]; s != nil && len(s.hs) > 0 {
				r.touch ^= uint32(s.hs[0]) // start loading the holders too
			}
		}
		for j := n; j < end; j++ {
			s := sets[j-n]
			if s == nil {
				n = j
				break walk
			}
			if lo, hi = r.step(s, int32(j), lo, hi); lo > hi {
				n = j
				break walk
			}
		}
		n = end
	}
	r.finish(v, int32(n), lo, hi)
}

// lookAhead is how many blocks MatchInto looks up ahead of using them.
const lookAhead = 16

// grow sizes the scratch for ids < n.
func (r *Result) grow(n int) {
	words := (n + 63) / 64
	if len(r.act[0]) < words {
		for t := range r.act {
			r.act[t] = make([]uint64, words)
			r.nxt[t] = make([]uint64, words)
		}
	}
	if len(r.depth) < n {
		r.depth = make([][kvtier.Count]int32, n)
	}
}

// seed starts the walk from the holders of the first block, keeping only
// workers visible in v. It returns the range of act words in use.
func (r *Result) seed(v *view, s *holderSet) (lo, hi int) {
	lo, hi = len(r.act[0]), -1
	r.ids = r.ids[:0]
	for _, h := range s.hs {
		id := h.id()
		if int(id) >= len(v.names) || v.names[id] == "" {
			continue
		}
		r.ids = append(r.ids, id)
		r.depth[id] = [kvtier.Count]int32{}
		w, bit := int(id/64), uint64(1)<<(id%64)
		for t := range kvtier.Tier(kvtier.Count) {
			if h.mask()&upTo(t) != 0 {
				r.act[t][w] |= bit
			}
		}
		lo, hi = min(lo, w), max(hi, w)
	}
	return lo, hi
}

// step intersects the active sets with the holders of block n, recording
// depth n for every worker that drops out. It returns the range of act
// words still in use, empty (lo > hi) when no worker is left. Shrinking the
// range matters: past a shared system prompt usually one worker is left.
func (r *Result) step(s *holderSet, n int32, lo, hi int) (int, int) {
	switch {
	case s.cum != nil:
		for t := range r.act {
			cum := s.cum[t]
			for j := lo; j <= hi; j++ {
				var c uint64
				if j < len(cum) {
					c = cum[j]
				}
				r.advance(t, j, r.act[t][j]&c, n)
			}
		}
	case len(s.hs) == 1:
		// One holder, the common case past a shared prefix: every word but
		// the holder's drops to zero, no scratch needed.
		h := s.hs[0]
		w, bit := int(h.id()/64), uint64(1)<<(h.id()%64)
		for t := range r.act {
			for j := lo; j <= hi; j++ {
				var next uint64
				if j == w && h.mask()&upTo(kvtier.Tier(t)) != 0 {
					next = r.act[t][j] & bit
				}
				r.advance(t, j, next, n)
			}
		}
	default:
		for t := range r.nxt {
			clear(r.nxt[t][lo : hi+1])
		}
		for _, h := range s.hs {
			id := h.id()
			w := int(id / 64)
			if w < lo || w > hi {
				continue
			}
			bit := uint64(1) << (id % 64)
			for t := range kvtier.Tier(kvtier.Count) {
				if h.mask()&upTo(t) != 0 {
					r.nxt[t][w] |= r.act[t][w] & bit
				}
			}
		}
		for t := range r.act {
			for j := lo; j <= hi; j++ {
				r.advance(t, j, r.nxt[t][j], n)
			}
		}
	}
	// Every act[t] is a subset of act[kvtier.Count-1].
	all := r.act[kvtier.Count-1]
	for lo <= hi && all[lo] == 0 {
		lo++
	}
	for lo <= hi && all[hi] == 0 {
		hi--
	}
	return lo, hi
}

// advance replaces act word j of tier t with next, recording depth n for
// the workers that dropped out.
func (r *Result) advance(t, j int, next uint64, n int32) {
	dropped := r.act[t][j] &^ next
	r.act[t][j] = next
	for dropped != 0 {
		id := j*64 + bits.TrailingZeros64(dropped)
		dropped &= dropped - 1
		r.depth[id][t] = n
	}
}

// finish records depth n for the workers still active, clears the scratch
// for the next call and fills r.Workers.
func (r *Result) finish(v *view, n int32, lo, hi int) {
	for t := range r.act {
		for j := lo; j <= hi; j++ {
			r.advance(t, j, 0, n)
		}
	}
	for _, id := range r.ids {
		d := r.depth[id]
		wm := WorkerMatch{Worker: v.names[id]}
		for t := range d {
			wm.Depth[t] = int(d[t])
		}
		r.Longest = max(r.Longest, wm.Depth[kvtier.Count-1])
		r.Workers = append(r.Workers, wm)
	}
}
