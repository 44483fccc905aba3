package kvbm

import "slices"

// slots is a tier's index of its block slots: which slot holds which
// block, the least-recently-used order of the idle ones, and pins. It is
// not safe for concurrent use: the tier's mutex guards it.
//
// A slot is free, being written (reserved, not yet advertised), live
// (indexed, advertised) or dropped (withdrawn while pinned: freed when the
// last reader unpins it). Only live, unpinned slots are on the LRU list,
// so eviction never takes a slot that a Get is copying from.
type slots struct {
	s          []slot
	index      map[uint64]int32
	free       []int32
	head, tail int32 // LRU list: head is the least recently used
}

type slotState uint8

const (
	slotFree slotState = iota
	slotWriting
	slotLive
	slotDropped
)

type slot struct {
	meta       Meta
	state      slotState
	pins       int32
	prev, next int32
	inLRU      bool
}

const noSlot = -1

func newSlots(n int) *slots {
	x := &slots{s: make([]slot, n), index: make(map[uint64]int32, min(n, 1<<16)), free: make([]int32, n), head: noSlot, tail: noSlot}
	for i := range x.s {
		x.s[i].prev, x.s[i].next = noSlot, noSlot
		x.free[i] = int32(n - 1 - i) // hand out 0, 1, 2, ...
	}
	return x
}

// live returns the live slot of hash.
func (x *slots) live(hash uint64) (int32, bool) {
	i, ok := x.index[hash]
	return i, ok
}

// reserve takes a slot for writing: a free one, else the least recently
// used live one, which it withdraws; evicted is that block's meta.
func (x *slots) reserve() (i int32, evicted *Meta, ok bool) {
	if k := len(x.free); k > 0 {
		i = x.free[k-1]
		x.free = x.free[:k-1]
		x.s[i].state = slotWriting
		return i, nil, true
	}
	if x.head == noSlot {
		return noSlot, nil, false
	}
	i = x.head
	m := x.s[i].meta
	x.lruRemove(i)
	delete(x.index, m.Hash)
	x.s[i].meta, x.s[i].state = Meta{}, slotWriting
	return i, &m, true
}

// publish makes a reserved slot live as block m, the most recently used.
func (x *slots) publish(i int32, m Meta) {
	x.s[i].meta, x.s[i].state = m, slotLive
	x.index[m.Hash] = i
	x.lruPush(i)
}

// abandon frees a reserved slot whose write failed.
func (x *slots) abandon(i int32) {
	x.s[i].state = slotFree
	x.free = append(x.free, i)
}

// pin keeps live slot i from eviction until unpin.
func (x *slots) pin(i int32) {
	if x.s[i].pins == 0 && x.s[i].inLRU {
		x.lruRemove(i)
	}
	x.s[i].pins++
}

// unpin releases a pin; the slot becomes the most recently used, or free
// if it was dropped meanwhile.
func (x *slots) unpin(i int32) {
	s := &x.s[i]
	s.pins--
	if s.pins > 0 {
		return
	}
	switch s.state {
	case slotLive:
		x.lruPush(i)
	case slotDropped:
		s.meta, s.state = Meta{}, slotFree
		x.free = append(x.free, i)
	}
}

// drop withdraws live slot i (a failed checksum, a delete); a pinned slot
// is freed when its last reader unpins it.
func (x *slots) drop(i int32) Meta {
	s := &x.s[i]
	m := s.meta
	delete(x.index, m.Hash)
	if s.inLRU {
		x.lruRemove(i)
	}
	if s.pins > 0 {
		s.state = slotDropped
		return m
	}
	s.meta, s.state = Meta{}, slotFree
	x.free = append(x.free, i)
	return m
}

// touch makes live, unpinned slot i the most recently used.
func (x *slots) touch(i int32) {
	if x.s[i].inLRU {
		x.lruRemove(i)
		x.lruPush(i)
	}
}

// metas returns the live blocks' metas, least recently used first.
func (x *slots) metas() []Meta {
	out := make([]Meta, 0, len(x.index))
	for i := x.head; i != noSlot; i = x.s[i].next {
		out = append(out, x.s[i].meta)
	}
	for _, i := range x.index { // pinned live slots are off the list
		if x.s[i].pins > 0 {
			out = append(out, x.s[i].meta)
		}
	}
	return out
}

func (x *slots) lruPush(i int32) {
	s := &x.s[i]
	s.prev, s.next = x.tail, noSlot
	if x.tail != noSlot {
		x.s[x.tail].next = i
	} else {
		x.head = i
	}
	x.tail, s.inLRU = i, true
}

func (x *slots) lruRemove(i int32) {
	s := &x.s[i]
	if s.prev != noSlot {
		x.s[s.prev].next = s.next
	} else {
		x.head = s.next
	}
	if s.next != noSlot {
		x.s[s.next].prev = s.prev
	} else {
		x.tail = s.prev
	}
	s.prev, s.next, s.inLRU = noSlot, noSlot, false
}

// take reserves free slot i itself (recovery puts blocks back in the
// slots they occupy on disk).
func (x *slots) take(i int32) {
	k := slices.Index(x.free, i)
	x.free = slices.Delete(x.free, k, k+1)
	x.s[i].state = slotWriting
}
