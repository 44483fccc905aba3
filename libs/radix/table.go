package radix

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// shardBits sets the shard count. Shards only bound how much a rehash
// copies at once (writers never serialise on them otherwise), so 256 keeps
// a rehash of a 1M-block index around 4K slots.
const (
	shardBits = 8
	numShards = 1 << shardBits
	minSlots  = 16
)

// Load factors of the open-addressed tables: a table is rehashed when its
// claimed slots (live plus dead) exceed maxLoad, into a table where the live
// entries fill about targetLoad. hardLoad is the ceiling a claim may never
// pass, which guarantees that every probe sequence ends at an empty slot.
const (
	maxLoadNum, maxLoadDen = 13, 16 // ~0.81
	targetLoadNum          = 1      // live/cap <= 1/2 after a rehash
	targetLoadDen          = 2
	hardLoadNum            = 15 // ~0.94
	hardLoadDen            = 16
)

// mix spreads a block hash over 64 bits (the splitmix64 finaliser), so that
// adversarial or sequential hashes still pick shards and slots uniformly.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// slot is one entry. key is written once, from 0 to the block hash, and
// never changes afterwards, so a reader that matched a key may trust the
// set it then loads. A nil set marks a dead entry (nobody holds the block);
// it stays claimed until the next rehash drops it.
type slot struct {
	key atomic.Uint64
	set atomic.Pointer[holderSet]
}

type table struct {
	slots []slot
	mask  uint64
	// used counts claimed slots. Claims reserve first (Add), so used never
	// exceeds hard even under concurrent claimers.
	used atomic.Int64
	grow int64 // rehash once used passes this
	hard int64 // a claim never takes used past this
	// zero stands in for the slot of block hash 0, because key 0 marks an
	// empty slot.
	zero slot
}

func newTable(n int) *table {
	t := &table{slots: make([]slot, n), mask: uint64(n - 1)}
	t.grow = int64(n) * maxLoadNum / maxLoadDen
	t.hard = int64(n) * hardLoadNum / hardLoadDen
	return t
}

// find returns the holder set of hash h (m = mix(h)); nil when not held.
// It never blocks and never writes. A nil table (a shard never written)
// holds nothing.
func (t *table) find(h, m uint64) *holderSet {
	if t == nil {
		return nil
	}
	if h == 0 {
		return t.zero.set.Load()
	}
	for i := m & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		switch s.key.Load() {
		case h:
			return s.set.Load()
		case 0:
			return nil
		}
	}
}

// lookup returns the slot of h, or nil when it has none.
func (t *table) lookup(h, m uint64) *slot {
	if h == 0 {
		return &t.zero
	}
	for i := m & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		switch s.key.Load() {
		case h:
			return s
		case 0:
			return nil
		}
	}
}

// claim returns the slot of h, claiming an empty one if needed. It returns
// nil when the table is too full to claim; the caller rehashes and retries.
func (t *table) claim(h, m uint64) *slot {
	if h == 0 {
		return &t.zero
	}
	for i := m & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		k := s.key.Load()
		if k == 0 {
			if t.used.Add(1) > t.hard {
				t.used.Add(-1)
				return nil
			}
			if s.key.CompareAndSwap(0, h) {
				return s
			}
			t.used.Add(-1)
			k = s.key.Load() // another writer claimed it first
		}
		if k == h {
			return s
		}
	}
}

// put inserts a live entry into a table nobody else can see yet. The table
// is published afterwards through an atomic pointer store, which orders
// these plain writes before any reader's loads, so put needs neither
// atomics nor CAS; rehash makes sure it fits and sets used once at the end.
func (t *table) put(h, m uint64, set *holderSet) {
	for i := m & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		k := (*uint64)(unsafe.Pointer(&s.key))
		if *k == 0 {
			*k = h
			*(*unsafe.Pointer)(unsafe.Pointer(&s.set)) = unsafe.Pointer(set)
			return
		}
	}
}

// shard is one independently rehashed part of the index.
type shard struct {
	// rw is held shared by writers while they update slots and exclusively
	// while the shard is rehashed. Readers never touch it.
	rw  sync.RWMutex
	tab atomic.Pointer[table]
	_   [40]byte // keep neighbouring shards' hot words on separate lines
}

// update applies o to the holder set of h (m = mix(h)), claiming a slot
// when o adds holders and skipping absent blocks otherwise.
func (s *shard) update(h, m uint64, o *op) {
	claim := o.add
	for {
		s.rw.RLock()
		t := s.tab.Load()
		if t == nil {
			s.rw.RUnlock()
			if !claim {
				return
			}
			s.rehash(nil)
			continue
		}
		var sl *slot
		if claim {
			sl = t.claim(h, m)
		} else {
			sl = t.lookup(h, m)
		}
		if sl != nil {
			casSet(sl, o)
		}
		full := claim && (sl == nil || t.used.Load() > t.grow)
		s.rw.RUnlock()
		if full {
			s.rehash(t)
		}
		if sl != nil || !claim {
			return
		}
	}
}

// casSet swaps sl's set for o.apply(old) until the swap wins.
func casSet(sl *slot, o *op) {
	for {
		old := sl.set.Load()
		nw := o.apply(old)
		if nw == old || sl.set.CompareAndSwap(old, nw) {
			return
		}
	}
}

// rehash replaces the table t with one sized for its live entries (or
// creates the first table when t is nil), unless another writer already
// did.
func (s *shard) rehash(t *table) {
	s.rw.Lock()
	defer s.rw.Unlock()
	if s.tab.Load() != t {
		return
	}
	if t == nil {
		s.tab.Store(newTable(minSlots))
		return
	}
	live := 0
	for i := range t.slots {
		if t.slots[i].set.Load() != nil {
			live++
		}
	}
	n := minSlots
	for n*targetLoadNum/targetLoadDen < live {
		n *= 2
	}
	nt := newTable(n)
	nt.zero.set.Store(t.zero.set.Load())
	for i := range t.slots {
		sl := &t.slots[i]
		set := sl.set.Load()
		if set == nil {
			continue
		}
		h := sl.key.Load()
		nt.put(h, mix(h), set)
	}
	nt.used.Store(int64(live))
	s.tab.Store(nt)
}

// scan calls f for every live block of the shard, with the set it had
// when visited, while holding the writers' shared lock: f may CAS sets
// (through casSet) and the shard is not rehashed meanwhile.
func (s *shard) scan(f func(h uint64, sl *slot, set *holderSet)) {
	s.rw.RLock()
	defer s.rw.RUnlock()
	t := s.tab.Load()
	if t == nil {
		return
	}
	if set := t.zero.set.Load(); set != nil {
		f(0, &t.zero, set)
	}
	for i := range t.slots {
		sl := &t.slots[i]
		if set := sl.set.Load(); set != nil {
			f(sl.key.Load(), sl, set)
		}
	}
}
