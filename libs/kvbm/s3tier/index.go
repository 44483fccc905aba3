package s3tier

import (
	"container/list"
	"slices"
	"sync"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvtier"
)

// index is what the tier knows the store holds: at most cap blocks, the
// least recently used forgotten first (announced Removed: this worker no
// longer vouches for it; the object stays), the writes in flight, and
// the counters. Changes are reported in order under its lock.
type index struct {
	mu      sync.Mutex
	cap     int
	on      kvbm.OnChange
	order   *list.List // of entry, front the most recent
	where   map[uint64]*list.Element
	pending map[uint64]bool
	st      kvbm.Stats
}

// entry is a block the store holds and the size of its object (header
// and data): a read asks for exactly that many bytes.
type entry struct {
	meta kvbm.Meta
	size int
}

func newIndex(capacity int, on kvbm.OnChange) *index {
	return &index{cap: capacity, on: on, order: list.New(), where: map[uint64]*list.Element{}, pending: map[uint64]bool{},
		st: kvbm.Stats{Tier: kvtier.External, Capacity: capacity}}
}

func (x *index) emit(k kvbm.ChangeKind, m kvbm.Meta) {
	if x.on != nil {
		x.on(kvbm.Change{Kind: k, Tier: kvtier.External, Meta: m})
	}
}

// reserve claims the write of hash; false if it is known or being written.
func (x *index) reserve(hash uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.where[hash]; ok || x.pending[hash] {
		if ok {
			x.order.MoveToFront(e)
		}
		x.st.Dedups++
		return false
	}
	x.pending[hash] = true
	return true
}

// abandon gives up the write of hash, which failed.
func (x *index) abandon(hash uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.pending, hash)
	x.st.WriteErrors++
}

// readFailed counts a read the store failed.
func (x *index) readFailed() {
	x.mu.Lock()
	x.st.ReadErrors++
	x.mu.Unlock()
}

// publish records block m, an object of size bytes, as in the store
// (written by us when wrote, n bytes of data).
func (x *index) publish(m kvbm.Meta, size, n int, wrote bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.pending, m.Hash)
	if wrote {
		x.st.Puts++
		x.st.BytesIn += uint64(n)
	} else {
		x.st.Dedups++
	}
	m.Tokens = slices.Clone(m.Tokens)
	x.addLocked(entry{meta: m, size: size})
}

// learn records a block found by listing, an object of size bytes.
func (x *index) learn(hash uint64, size int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.where[hash]; ok {
		e.Value = entry{meta: e.Value.(entry).meta, size: size} // the store's word on its size
		return
	}
	x.addLocked(entry{meta: kvbm.Meta{Hash: hash}, size: size})
}

func (x *index) addLocked(en entry) {
	if e, ok := x.where[en.meta.Hash]; ok {
		if len(en.meta.Tokens) > 0 { // a fuller meta than the listing gave
			e.Value = en
		}
		x.order.MoveToFront(e)
		return
	}
	if x.order.Len() >= x.cap {
		old := x.order.Back()
		om := old.Value.(entry).meta
		x.order.Remove(old)
		delete(x.where, om.Hash)
		x.st.Evictions++
		x.emit(kvbm.Removed, om)
	}
	x.where[en.meta.Hash] = x.order.PushFront(en)
	x.emit(kvbm.Stored, en.meta)
}

// size returns the size of block hash's object; false if the block is
// not known to be in the store.
func (x *index) size(hash uint64) (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.where[hash]
	if !ok {
		return 0, false
	}
	return e.Value.(entry).size, true
}

func (x *index) miss() {
	x.mu.Lock()
	x.st.Misses++
	x.mu.Unlock()
}

func (x *index) hit(hash uint64, n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.st.Hits++
	x.st.BytesOut += uint64(n)
	if e, ok := x.where[hash]; ok {
		x.order.MoveToFront(e)
	}
}

// drop forgets hash (gone from the store, or corrupt).
func (x *index) drop(hash uint64, corrupt bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if corrupt {
		x.st.Corrupt++
	}
	e, ok := x.where[hash]
	if !ok {
		return
	}
	m := e.Value.(entry).meta
	x.order.Remove(e)
	delete(x.where, hash)
	x.emit(kvbm.Removed, m)
}

func (x *index) prefix(hashes []uint64) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	for n, h := range hashes {
		if _, ok := x.where[h]; !ok {
			return n
		}
	}
	return len(hashes)
}

func (x *index) blocks() []kvbm.Meta {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]kvbm.Meta, 0, x.order.Len())
	for e := x.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(entry).meta)
	}
	return out
}

func (x *index) stats() kvbm.Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.st
	s.Blocks = x.order.Len()
	return s
}
