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

// slot is one entry. A nil set marks a dead entry (a tombstone: nobody
// holds the block). Its key stays until either the same key comes back
// (revived in place) or a writer reuses the slot for a new key, which bumps
// the table's reuses counter between writing the new key and the new set;
// lock-free readers use that counter to reject a set they might have read
// across a reuse (see find).
type slot struct {
	key atomic.Uint64
	set atomic.Pointer[holderSet]
}

type table struct {
	slots []slot
	mask  uint64
	// reuses counts tombstones reused for a different key. Written under
	// the shard's mutex, read by lock-free readers.
	reuses atomic.Uint64
	// used counts claimed slots (live plus dead); guarded by the shard's
	// mutex, like every other write to the table.
	used int64
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
//
// Keys never go back to 0, so probe chains never break, and a key that is
// live throughout a find keeps its slot. A slot may however be reused for a
// different key while find reads it. A writer reusing a slot stores the new
// key, then bumps reuses, then stores the new set; so if reuses is the same
// before and after, the set read belongs to h (or is h's tombstone). When
// it changed, find retries: that takes another writer's completed reuse in
// this shard during the few loads of a probe, never a wait on a writer.
func (t *table) find(h, m uint64) *holderSet {
	if t == nil {
		return nil
	}
	if h == 0 {
		return t.zero.set.Load()
	}
	for {
		g := t.reuses.Load()
		for i := m & t.mask; ; i = (i + 1) & t.mask {
			s := &t.slots[i]
			switch s.key.Load() {
			case h:
				set := s.set.Load()
				if t.reuses.Load() == g {
					return set
				}
			case 0:
				return nil
			default:
				continue
			}
			break
		}
	}
}

// lookup returns the slot of h, or nil when it has none. The shard's mutex
// must be held.
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

// claim returns the slot of h, reusing the first tombstone of its probe
// chain or claiming an empty slot when h has none. It returns nil when the
// table is too full to claim; the caller rehashes and retries. The shard's
// mutex must be held (writers are exclusive per shard, so a key can never
// be claimed twice).
func (t *table) claim(h, m uint64) *slot {
	if h == 0 {
		return &t.zero
	}
	var tomb *slot
	for i := m & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		k := s.key.Load()
		if k == h {
			return s
		}
		if k == 0 {
			if tomb != nil {
				// Order matters to find: key, reuses, then (caller) set.
				tomb.key.Store(h)
				t.reuses.Add(1)
				return tomb
			}
			if t.used >= t.hard {
				return nil
			}
			t.used++
			s.key.Store(h)
			return s
		}
		if tomb == nil && s.set.Load() == nil {
			tomb = s
		}
	}
}

// put inserts a live entry into a table nobody else can see yet. The table
// is published afterwards through an atomic pointer store, which orders
// these plain writes before any reader's loads, so put needs no atomics;
// rehash makes sure it fits and sets used once at the end.
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
	// mu serialises the shard's writers: each holds it for one block's
	// update (a few loads and stores), or for a rehash or scan. Readers
	// never touch it.
	mu  sync.Mutex
	tab atomic.Pointer[table]
	_   [48]byte // keep neighbouring shards' hot words on separate lines
}

// update applies o to the holder set of h (m = mix(h)), claiming a slot
// when o adds holders and skipping absent blocks otherwise.
func (s *shard) update(h, m uint64, o *op) {
	s.mu.Lock()
	t := s.tab.Load()
	if t == nil {
		if !o.add {
			s.mu.Unlock()
			return
		}
		t = newTable(minSlots)
		s.tab.Store(t)
	}
	var sl *slot
	if o.add {
		for sl = t.claim(h, m); sl == nil; sl = t.claim(h, m) {
			t = s.rehashLocked(t)
		}
	} else {
		sl = t.lookup(h, m)
	}
	if sl != nil {
		setSet(sl, o)
	}
	if t.used > t.grow {
		s.rehashLocked(t)
	}
	s.mu.Unlock()
}

// setSet replaces sl's set with o.apply(old). The shard's mutex must be
// held, so no other writer races the store.
func setSet(sl *slot, o *op) {
	old := sl.set.Load()
	if nw := o.apply(old); nw != old {
		sl.set.Store(nw)
	}
}

// rehashLocked replaces the table t with one sized for its live entries
// and returns it. Readers keep using t meanwhile, which no writer touches
// any more. The shard's mutex must be held.
func (s *shard) rehashLocked(t *table) *table {
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
	nt.used = int64(live)
	s.tab.Store(nt)
	return nt
}

// scan calls f for every live block of the shard, with the set it had
// when visited, while holding the shard's mutex: f may replace sets
// (through setSet) and the shard is not rehashed meanwhile.
func (s *shard) scan(f func(h uint64, sl *slot, set *holderSet)) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
