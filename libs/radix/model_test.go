package radix

import (
	"cmp"
	"maps"
	"slices"
	"testing"

	"switchyard.dev/libs/kvtier"
)

// model is the obviously-correct reference the index is checked against:
// plain maps, no concurrency.
type model struct {
	workers map[string]*modelWorker
}

type modelWorker struct {
	next   uint64
	blocks map[uint64]kvtier.Mask
}

func newModel() *model { return &model{workers: map[string]*modelWorker{}} }

func (m *model) add(name string) { m.workers[name] = &modelWorker{blocks: map[uint64]kvtier.Mask{}} }

func (m *model) apply(name string, events ...Event) {
	w := m.workers[name]
	for _, e := range events {
		switch e.Kind {
		case Stored:
			for _, h := range e.Hashes {
				w.blocks[h] |= e.Tier.Mask()
			}
		case Removed:
			for _, h := range e.Hashes {
				if rest := w.blocks[h] &^ e.Tier.Mask(); rest != 0 {
					w.blocks[h] = rest
				} else {
					delete(w.blocks, h)
				}
			}
		case Cleared:
			clear(w.blocks)
		}
	}
}

func (m *model) resync(name string, seq uint64, blocks []Block) {
	w := m.workers[name]
	clear(w.blocks)
	for _, b := range blocks {
		w.blocks[b.Hash] |= b.Tiers
	}
	w.next = seq + 1
}

func (m *model) dump() map[string]WorkerState {
	out := map[string]WorkerState{}
	for name, w := range m.workers {
		var bs []Block
		for h, t := range w.blocks {
			bs = append(bs, Block{Hash: h, Tiers: t})
		}
		slices.SortFunc(bs, func(a, b Block) int { return cmp.Compare(a.Hash, b.Hash) })
		out[name] = WorkerState{Next: w.next, Blocks: bs}
	}
	return out
}

// match returns every worker's depths for hashes, omitting workers that do
// not hold the first block.
func (m *model) match(hashes []uint64) map[string][kvtier.Count]int {
	out := map[string][kvtier.Count]int{}
	for name, w := range m.workers {
		var d [kvtier.Count]int
		for t := range kvtier.Tier(kvtier.Count) {
			for _, h := range hashes {
				if w.blocks[h]&upTo(t) == 0 {
					break
				}
				d[t]++
			}
		}
		if d[kvtier.Count-1] > 0 {
			out[name] = d
		}
	}
	return out
}

// depths flattens a Result for comparison.
func depths(r *Result) map[string][kvtier.Count]int {
	out := map[string][kvtier.Count]int{}
	for _, wm := range r.Workers {
		out[wm.Worker] = wm.Depth
	}
	return out
}

func checkDump(t *testing.T, got, want map[string]WorkerState) {
	t.Helper()
	eq := maps.EqualFunc(got, want, func(a, b WorkerState) bool {
		return a.Next == b.Next && slices.Equal(a.Blocks, b.Blocks)
	})
	if !eq {
		t.Fatalf("dump mismatch:\n got  %v\n want %v", got, want)
	}
}

func checkMatch(t *testing.T, ix *Index, m *model, hashes []uint64) {
	t.Helper()
	r := ix.Match(hashes)
	want := m.match(hashes)
	if got := depths(r); !maps.Equal(got, want) {
		t.Fatalf("match %v:\n got  %v\n want %v", hashes, got, want)
	}
	longest := 0
	for _, d := range want {
		longest = max(longest, d[kvtier.Count-1])
	}
	if r.Longest != longest {
		t.Fatalf("match %v: Longest %d, want %d", hashes, r.Longest, longest)
	}
}
