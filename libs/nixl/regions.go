package nixl

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"switchyard.dev/libs/nixl/metadata"
)

// regionTable owns the agent's registered regions, memory and storage in
// one id space, and counts the accesses in flight on each, so
// deregistration can wait for them. Storage regions are the agent's own:
// Acquire (what serves peers) and snapshot (what metadata lists) skip them.
type regionTable struct {
	mu      sync.Mutex
	next    RegionID
	m       map[RegionID]*region
	changed chan struct{} // closed and replaced when a dying region's last access ends
}

type region struct {
	mem   []byte
	seg   Segment // nil for memory
	keys  []metadata.Key
	refs  int
	dying bool
}

func newRegionTable() *regionTable {
	return &regionTable{next: 1, m: map[RegionID]*region{}, changed: make(chan struct{})}
}

func (t *regionTable) add(mem []byte) RegionID {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.next
	t.next++
	t.m[id] = &region{mem: mem}
	return id
}

// addAt adds mem under an id its caller chose; false if id is taken.
func (t *regionTable) addAt(id RegionID, mem []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[id]; ok {
		return false
	}
	t.m[id] = &region{mem: mem}
	return true
}

// reserve takes an id for a storage region that its backend registers
// before insert makes it visible.
func (t *regionTable) reserve() RegionID {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.next
	t.next++
	return id
}

func (t *regionTable) insert(id RegionID, seg Segment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[id] = &region{seg: seg}
}

// Acquire implements RegionAccess.
func (t *regionTable) Acquire(id RegionID, off, n uint64) ([]byte, func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[id]
	if !ok || r.dying || r.seg != nil {
		return nil, nil, fmt.Errorf("%w: %d", ErrUnknownRegion, id)
	}
	if !inRange(off, n, uint64(len(r.mem))) {
		return nil, nil, fmt.Errorf("%w: region %d [%d,+%d) of %d", ErrOutOfRange, id, off, n, len(r.mem))
	}
	return r.mem[off : off+n : off+n], t.hold(r), nil
}

// acquireStorage is Acquire for a storage region: it checks the range and
// holds the region until release, and returns its segment.
func (t *regionTable) acquireStorage(id RegionID, off, n uint64) (Segment, func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[id]
	if !ok || r.dying {
		return nil, nil, fmt.Errorf("%w: %d", ErrUnknownRegion, id)
	}
	if r.seg == nil {
		return nil, nil, fmt.Errorf("%w: region %d is memory, not storage", ErrUnknownRegion, id)
	}
	if !inRange(off, n, r.seg.Size()) {
		return nil, nil, fmt.Errorf("%w: %v region %d [%d,+%d) of %d", ErrOutOfRange, r.seg.Kind(), id, off, n, r.seg.Size())
	}
	return r.seg, t.hold(r), nil
}

// hold counts an access to r (under t.mu) and returns its release.
func (t *regionTable) hold(r *region) func() {
	r.refs++
	var once sync.Once
	return func() { once.Do(func() { t.release(r) }) }
}

// segment returns id's segment: nil and true for a memory region, false
// if there is no such region.
func (t *regionTable) segment(id RegionID) (Segment, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[id]
	if !ok {
		return nil, false
	}
	return r.seg, true
}

func (t *regionTable) release(r *region) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.refs--
	if r.dying && r.refs == 0 { // only a remove can be waiting, and only for this
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// remove refuses new accesses to id and waits for current ones to end.
// A call after one that gave up (ctx) waits the same way: the region stays
// refused meanwhile. The call that sees the accesses end removes the
// region and reports removed; one that finds it removed by a concurrent
// call reports neither removal nor error.
func (t *regionTable) remove(ctx context.Context, id RegionID) (removed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[id]
	if !ok {
		return false, fmt.Errorf("%w: %d", ErrUnknownRegion, id)
	}
	r.dying = true
	for r.refs > 0 {
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			t.mu.Lock()
			return false, fmt.Errorf("nixl: deregister region %d: accesses still in flight: %w", id, ctx.Err())
		}
		t.mu.Lock()
	}
	if t.m[id] != r {
		return false, nil
	}
	delete(t.m, id)
	return true, nil
}

func (t *regionTable) setKeys(id RegionID, keys []metadata.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.m[id]; ok {
		r.keys = keys
	}
}

// snapshot lists live regions for metadata, by id.
func (t *regionTable) snapshot() []metadata.Region {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]metadata.Region, 0, len(t.m))
	for id, r := range t.m {
		if !r.dying && r.seg == nil {
			out = append(out, metadata.Region{ID: uint32(id), Len: uint64(len(r.mem)), Keys: r.keys})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Regions is a table of memory regions under ids its owner chooses, with
// the agent's own accounting of accesses: Acquire holds a region until
// released, and Remove waits for the holds to end. A backend that serves
// an agent's regions from another process (the UCX backend's UCX
// process) mirrors them in one.
type Regions struct{ t *regionTable }

// NewRegions returns an empty table.
func NewRegions() *Regions { return &Regions{t: newRegionTable()} }

// Add makes mem region id; an id in use is an error.
func (r *Regions) Add(id RegionID, mem []byte) error {
	if !r.t.addAt(id, mem) {
		return fmt.Errorf("nixl: region %d is registered already", id)
	}
	return nil
}

// Acquire implements RegionAccess.
func (r *Regions) Acquire(id RegionID, off, n uint64) ([]byte, func(), error) {
	return r.t.Acquire(id, off, n)
}

// Remove refuses new accesses to id and waits, bounded by ctx, for the
// current ones to end (see DeregisterMemory for a call that gives up).
func (r *Regions) Remove(ctx context.Context, id RegionID) error {
	_, err := r.t.remove(ctx, id)
	return err
}
