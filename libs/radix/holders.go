package radix

import (
	"slices"

	"switchyard.dev/libs/kvtier"
)

// holder packs a dense worker id and its tier mask for one block:
// id<<maskBits | mask. The mask is never zero inside a published set.
type holder uint32

// maskBits is one bit per tier.
const maskBits = kvtier.Count

func mkHolder(id uint32, m kvtier.Mask) holder { return holder(id<<maskBits | uint32(m)) }
func (h holder) id() uint32                    { return uint32(h) >> maskBits }
func (h holder) mask() kvtier.Mask             { return kvtier.Mask(h & (1<<maskBits - 1)) }

// bigSetMin is the holder count from which a set also carries cumulative
// bitmaps. Below it Match scans the few entries; above it Match ANDs words,
// which keeps blocks shared by every worker (system prompts) cheap.
const bigSetMin = 16

// holderSet is the immutable set of workers holding one block.
type holderSet struct {
	hs []holder // sorted by id
	// cum[t] has bit id set when worker id holds the block in a tier no
	// slower than t. Only set when len(hs) >= bigSetMin; words past the end
	// of a slice are zero.
	cum *[kvtier.Count][]uint64
}

// singles holds the canonical one-holder sets of one dense id, one per
// mask, so a block held by a single worker (by far the common case) costs
// no allocation beyond its table slot.
type singles struct {
	backing [1 << maskBits]holder
	sets    [1 << maskBits]holderSet
}

func newSingles(id uint32) *singles {
	s := new(singles)
	for m := range s.sets {
		s.backing[m] = mkHolder(id, kvtier.Mask(m))
		s.sets[m].hs = s.backing[m : m+1 : m+1]
	}
	return s
}

// find returns the position of id in s, or where it would be inserted.
func (s *holderSet) find(id uint32) (int, bool) {
	if len(s.hs) < 16 {
		for i, h := range s.hs {
			if h.id() >= id {
				return i, h.id() == id
			}
		}
		return len(s.hs), false
	}
	return slices.BinarySearchFunc(s.hs, id, func(h holder, id uint32) int {
		return int(int64(h.id()) - int64(id))
	})
}

// setOps builds new holder sets. singles is a snapshot of the index's
// canonical singletons by id; an id it lacks (allocated after the snapshot
// was taken) just gets a freshly allocated set.
type setOps struct {
	singles []*singles
}

// single returns the canonical set {id: m}.
func (o setOps) single(id uint32, m kvtier.Mask) *holderSet {
	if int(id) < len(o.singles) && o.singles[id] != nil {
		return &o.singles[id].sets[m]
	}
	return &holderSet{hs: []holder{mkHolder(id, m)}}
}

// op is one per-block change: add or clear tiers mask for worker id.
type op struct {
	ops  setOps
	id   uint32
	mask kvtier.Mask
	add  bool
	sink uint64 // keeps look-ahead loads from being elided
}

func (o *op) apply(s *holderSet) *holderSet {
	if o.add {
		return o.ops.with(s, o.id, o.mask)
	}
	return o.ops.without(s, o.id, o.mask)
}

// with returns s with tiers m added for id; s itself if nothing changes.
func (o setOps) with(s *holderSet, id uint32, m kvtier.Mask) *holderSet {
	if s == nil {
		return o.single(id, m)
	}
	i, ok := s.find(id)
	if ok {
		old := s.hs[i].mask()
		if old|m == old {
			return s
		}
		if len(s.hs) == 1 {
			return o.single(id, old|m)
		}
		hs := slices.Clone(s.hs)
		hs[i] = mkHolder(id, old|m)
		return build(hs)
	}
	hs := make([]holder, 0, len(s.hs)+1)
	hs = append(hs, s.hs[:i]...)
	hs = append(hs, mkHolder(id, m))
	hs = append(hs, s.hs[i:]...)
	return build(hs)
}

// without returns s with tiers m cleared for id (dropping id when no tier
// is left); nil when the set becomes empty; s itself if nothing changes.
func (o setOps) without(s *holderSet, id uint32, m kvtier.Mask) *holderSet {
	if s == nil {
		return nil
	}
	i, ok := s.find(id)
	if !ok {
		return s
	}
	old := s.hs[i].mask()
	rest := old &^ m
	if rest == old {
		return s
	}
	if rest != 0 {
		if len(s.hs) == 1 {
			return o.single(id, rest)
		}
		hs := slices.Clone(s.hs)
		hs[i] = mkHolder(id, rest)
		return build(hs)
	}
	switch len(s.hs) {
	case 1:
		return nil
	case 2:
		other := s.hs[1-i]
		return o.single(other.id(), other.mask())
	}
	hs := make([]holder, 0, len(s.hs)-1)
	hs = append(hs, s.hs[:i]...)
	hs = append(hs, s.hs[i+1:]...)
	return build(hs)
}

// build wraps freshly made, sorted holders into a set, adding the bitmaps
// when the set is big.
func build(hs []holder) *holderSet {
	s := &holderSet{hs: hs}
	if len(hs) < bigSetMin {
		return s
	}
	words := int(hs[len(hs)-1].id()/64) + 1
	var cum [kvtier.Count][]uint64
	flat := make([]uint64, kvtier.Count*words)
	for t := range cum {
		cum[t] = flat[t*words : (t+1)*words : (t+1)*words]
	}
	for _, h := range hs {
		id, m := h.id(), h.mask()
		for t := range kvtier.Tier(kvtier.Count) {
			if m&upTo(t) != 0 {
				cum[t][id/64] |= 1 << (id % 64)
			}
		}
	}
	s.cum = &cum
	return s
}
