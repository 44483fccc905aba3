package radix

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"switchyard.dev/libs/kvtier"
)

// Errors returned by the index. They are wrapped with context; test with
// errors.Is.
var (
	ErrUnknownWorker  = errors.New("radix: unknown worker")
	ErrWorkerExists   = errors.New("radix: worker already exists")
	ErrInvalidWorker  = errors.New("radix: invalid worker id")
	ErrTooManyWorkers = errors.New("radix: too many workers")
	ErrInvalidEvent   = errors.New("radix: invalid event")
)

// maxIDs bounds the dense id space. Ids are recycled, so this bounds
// concurrently known workers (plus those in the middle of a Resync).
const maxIDs = 1 << 16

// Index is a concurrent index of KV blocks held by workers. The zero value
// is not usable; create one with New. All methods are safe for concurrent
// use.
type Index struct {
	shards [numShards]shard

	view atomic.Pointer[view]

	idMu sync.Mutex // guards inUse and free, and serialises view updates
	// inUse[id] is true from allocation until the id's holdings are swept.
	inUse []bool
	free  []uint32
}

// view is the immutable mapping between external worker ids and dense ids
// that readers load once per call.
type view struct {
	byName map[string]*worker
	// names[id] is the external id of the worker whose current dense id is
	// id, or "" while id is free, being filled, or being swept.
	names []string
	// singles[id] are the canonical one-holder sets of id (never freed).
	singles []*singles
}

// worker is the per-worker writer state. Its mutex serialises that worker's
// writes only.
type worker struct {
	name string
	mu   sync.Mutex
	id   uint32 // current dense id; guarded by mu
	next uint64 // next expected sequence number; guarded by mu
	gone bool   // removed from the index; guarded by mu
}

// New returns an empty index.
func New() *Index {
	ix := &Index{}
	ix.view.Store(&view{byName: map[string]*worker{}})
	return ix
}

func (ix *Index) shardOf(m uint64) *shard { return &ix.shards[m>>(64-shardBits)] }

// lookup returns the holder set of block hash h; nil when nobody holds it.
func (ix *Index) lookup(h uint64) *holderSet {
	m := mix(h)
	return ix.shardOf(m).tab.Load().find(h, m)
}

// update applies o to block h.
func (ix *Index) update(h uint64, o *op) {
	m := mix(h)
	ix.shardOf(m).update(h, m, o)
}

// updateAll applies o to every block of hs. Like Match, it first touches
// the home slots of a window of blocks so that their cache misses overlap,
// then updates them one by one.
func (ix *Index) updateAll(hs []uint64, o *op) {
	var ms [lookAhead]uint64
	for len(hs) > 0 {
		w := hs[:min(lookAhead, len(hs))]
		hs = hs[len(w):]
		var sink uint64
		for j, h := range w {
			ms[j] = mix(h)
			if t := ix.shardOf(ms[j]).tab.Load(); t != nil {
				sink ^= t.slots[ms[j]&t.mask].key.Load()
			}
		}
		o.sink ^= sink
		for j, h := range w {
			ix.shardOf(ms[j]).update(h, ms[j], o)
		}
	}
}

// AddWorker registers a worker under its external id. It expects sequence
// number 0 next (see ApplyBatch).
func (ix *Index) AddWorker(name string) error {
	if name == "" {
		return fmt.Errorf("add worker: %w: empty", ErrInvalidWorker)
	}
	ix.idMu.Lock()
	defer ix.idMu.Unlock()
	if _, ok := ix.view.Load().byName[name]; ok {
		return fmt.Errorf("add worker %q: %w", name, ErrWorkerExists)
	}
	id, err := ix.allocLocked()
	if err != nil {
		return fmt.Errorf("add worker %q: %w", name, err)
	}
	w := &worker{name: name, id: id}
	ix.publishLocked(func(v *view) {
		v.byName[name] = w
		v.names[id] = name
	})
	return nil
}

// RemoveWorker forgets a worker and drops all its blocks. Matches started
// after it returns no longer report the worker.
func (ix *Index) RemoveWorker(name string) error {
	w, err := ix.lockWorker(name)
	if err != nil {
		return fmt.Errorf("remove worker: %w", err)
	}
	defer w.mu.Unlock()
	ix.idMu.Lock()
	ix.publishLocked(func(v *view) {
		delete(v.byName, name)
		v.names[w.id] = ""
	})
	ix.idMu.Unlock()
	ix.sweep(w.id)
	ix.freeID(w.id)
	w.gone = true
	return nil
}

// Workers returns the external ids of all workers, sorted.
func (ix *Index) Workers() []string {
	return slices.Sorted(maps.Keys(ix.view.Load().byName))
}

// NextSeq returns the sequence number ApplyBatch expects next for worker.
func (ix *Index) NextSeq(name string) (uint64, error) {
	w, err := ix.lockWorker(name)
	if err != nil {
		return 0, fmt.Errorf("next seq: %w", err)
	}
	defer w.mu.Unlock()
	return w.next, nil
}

// lockWorker returns the named worker, locked.
func (ix *Index) lockWorker(name string) (*worker, error) {
	w := ix.view.Load().byName[name]
	if w == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorker, name)
	}
	w.mu.Lock()
	if w.gone {
		w.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorker, name)
	}
	return w, nil
}

// allocLocked returns an unused dense id, preferring the lowest so that
// Match's bitmaps stay short. ix.idMu must be held.
func (ix *Index) allocLocked() (uint32, error) {
	if len(ix.free) > 0 {
		i := 0
		for j, id := range ix.free {
			if id < ix.free[i] {
				i = j
			}
		}
		id := ix.free[i]
		ix.free = slices.Delete(ix.free, i, i+1)
		ix.inUse[id] = true
		return id, nil
	}
	if len(ix.inUse) >= maxIDs {
		return 0, ErrTooManyWorkers
	}
	id := uint32(len(ix.inUse))
	ix.inUse = append(ix.inUse, true)
	ix.publishLocked(func(v *view) {
		v.names = append(v.names, "")
		v.singles = append(v.singles, newSingles(id))
	})
	return id, nil
}

// freeID recycles a swept id.
func (ix *Index) freeID(id uint32) {
	ix.idMu.Lock()
	defer ix.idMu.Unlock()
	ix.inUse[id] = false
	ix.free = append(ix.free, id)
}

// publishLocked stores a modified copy of the view. ix.idMu must be held.
func (ix *Index) publishLocked(f func(*view)) {
	old := ix.view.Load()
	v := &view{
		byName:  maps.Clone(old.byName),
		names:   slices.Clone(old.names),
		singles: slices.Clone(old.singles),
	}
	f(v)
	ix.view.Store(v)
}

// sweep drops every holding of dense id.
func (ix *Index) sweep(id uint32) {
	o := op{ops: ix.setOps(), id: id, mask: kvtier.All}
	for i := range ix.shards {
		ix.shards[i].scan(func(_ uint64, sl *slot, _ *holderSet) { setSet(sl, &o) })
	}
}

func (ix *Index) setOps() setOps { return setOps{singles: ix.view.Load().singles} }

// replace gives w a fresh dense id holding exactly blocks, publishes it in
// place of the old one, then sweeps and recycles the old id. If no id is
// free it degrades to sweeping and refilling the current id in place, which
// readers may observe half done but which ends in the same state. w.mu must
// be held.
func (ix *Index) replace(w *worker, blocks []Block) {
	ix.idMu.Lock()
	id, err := ix.allocLocked()
	ix.idMu.Unlock()
	if err != nil {
		ix.sweep(w.id)
		ix.fill(w.id, blocks)
		return
	}
	ix.fill(id, blocks)
	old := w.id
	ix.idMu.Lock()
	ix.publishLocked(func(v *view) {
		v.names[old] = ""
		v.names[id] = w.name
	})
	w.id = id
	ix.idMu.Unlock()
	ix.sweep(old)
	ix.freeID(old)
}

// fill adds blocks to dense id.
func (ix *Index) fill(id uint32, blocks []Block) {
	o := op{ops: ix.setOps(), id: id, add: true}
	for _, b := range blocks {
		o.mask = b.Tiers
		ix.update(b.Hash, &o)
	}
}
