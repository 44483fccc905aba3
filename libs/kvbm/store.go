package kvbm

import (
	"slices"
	"sync"

	"switchyard.dev/libs/kvtier"
)

// store is what every tier keeps besides its bytes: the slot index, the
// writes in progress, the counters and the copies in flight, under one
// mutex. A tier brackets each copy with begin/end calls and does the copy
// itself, outside the lock; Prefix, Blocks and Stats are the store's.
type store struct {
	tier kvtier.Tier
	on   OnChange

	mu       sync.Mutex
	x        *slots
	pending  map[uint64]bool // blocks being written
	stats    Stats
	closed   bool
	inflight sync.WaitGroup // copies in or out of the tier
}

func newStore(tier kvtier.Tier, blocks, blockBytes int, on OnChange) *store {
	return &store{tier: tier, on: on, x: newSlots(blocks), pending: map[uint64]bool{},
		stats: Stats{Tier: tier, Capacity: blocks, BlockBytes: blockBytes}}
}

// Kind names the tier.
func (s *store) Kind() kvtier.Tier { return s.tier }

// emit reports a change; s.mu held.
func (s *store) emit(k ChangeKind, m Meta) {
	if s.on != nil {
		s.on(Change{Kind: k, Tier: s.tier, Meta: m})
	}
}

// beginPut reserves a slot for block m, evicting the least recently used
// block if need be. ok is false, with no error, when the block is held or
// being written already.
func (s *store) beginPut(m Meta) (slot int32, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return noSlot, false, ErrClosed
	}
	if i, held := s.x.live(m.Hash); held || s.pending[m.Hash] {
		if held {
			s.x.touch(i)
		}
		s.stats.Dedups++
		return noSlot, false, nil
	}
	i, evicted, free := s.x.reserve()
	if !free {
		return noSlot, false, ErrFull
	}
	if evicted != nil {
		s.stats.Evictions++
		s.emit(Removed, *evicted)
	}
	s.pending[m.Hash] = true
	s.inflight.Add(1)
	return i, true, nil
}

// endPut publishes block m in its reserved slot once its n bytes are
// written, or frees the slot when the write failed.
func (s *store) endPut(slot int32, m Meta, n int, werr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight.Done()
	delete(s.pending, m.Hash)
	if werr != nil {
		s.x.abandon(slot)
		s.stats.WriteErrors++
		return
	}
	m.Tokens = slices.Clone(m.Tokens)
	s.x.publish(slot, m)
	s.stats.Puts++
	s.stats.BytesIn += uint64(n)
	s.emit(Stored, m)
}

// beginGet pins the slot of block hash for reading.
func (s *store) beginGet(hash uint64) (slot int32, m Meta, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return noSlot, Meta{}, ErrClosed
	}
	i, ok := s.x.live(hash)
	if !ok {
		s.stats.Misses++
		return noSlot, Meta{}, ErrNotFound
	}
	s.x.pin(i)
	s.inflight.Add(1)
	m = s.x.s[i].meta
	m.Tokens = slices.Clone(m.Tokens)
	return i, m, nil
}

// endGet unpins a slot after n bytes were read from it. A read that
// failed (rerr) drops the block, unless another block took the slot
// meanwhile, and counts it as corrupt when corrupt is set.
func (s *store) endGet(slot int32, hash uint64, n int, rerr error, corrupt bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight.Done()
	if rerr != nil {
		if sl := &s.x.s[slot]; sl.state == slotLive && sl.meta.Hash == hash {
			s.emit(Removed, s.x.drop(slot))
			if corrupt {
				s.stats.Corrupt++
			}
		}
		if !corrupt {
			s.stats.ReadErrors++
		}
		s.x.unpin(slot)
		return
	}
	s.x.unpin(slot)
	s.stats.Hits++
	s.stats.BytesOut += uint64(n)
}

// restore puts block m back in slot i, where it was found (disk
// recovery), unless the block is held already.
func (s *store) restore(i int32, m Meta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.x.live(m.Hash); dup {
		return
	}
	s.x.take(i)
	s.x.publish(i, m)
	s.emit(Stored, m)
}

// Prefix counts the leading hashes held.
func (s *store) Prefix(hashes []uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, hash := range hashes {
		if _, ok := s.x.live(hash); !ok {
			return n
		}
	}
	return len(hashes)
}

// Blocks lists the advertised blocks.
func (s *store) Blocks() []Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.x.metas()
}

// Stats returns occupancy and traffic.
func (s *store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Blocks = len(s.x.index)
	return st
}

// shut refuses new copies and waits for those in flight; it reports
// whether the store was open.
func (s *store) shut() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	s.mu.Unlock()
	s.inflight.Wait()
	return true
}
