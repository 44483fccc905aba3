package kvcache

import (
	"cmp"
	"slices"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
)

// Snapshot returns one Stored event per cached block, every parent before
// its children, so a subscriber that lost events can rebuild its index.
// Blocks whose parent is not cached (possible after an orphaning eviction)
// come first, as roots.
func (m *Manager) Snapshot() []kvevent.Event {
	kids := make(map[uint64][]int32, len(m.cache))
	var roots []int32
	for _, id := range m.cache {
		p := m.blocks[id].parent
		if _, ok := m.cache[p]; ok && p != kvhash.Root {
			kids[p] = append(kids[p], id)
		} else {
			roots = append(roots, id)
		}
	}
	byHash := func(a, b int32) int { return cmp.Compare(m.blocks[a].hash, m.blocks[b].hash) }
	slices.SortFunc(roots, byHash) // deterministic output
	out := make([]kvevent.Event, 0, len(m.cache))
	stack := slices.Clone(roots)
	slices.Reverse(stack)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		b := &m.blocks[id]
		out = append(out, kvevent.Event{
			Kind:        kvevent.Stored,
			BlockHashes: []uint64{b.hash},
			ParentHash:  b.parent,
			TokenIDs:    slices.Clone(b.tokens),
			BlockSize:   m.cfg.BlockSize,
			Tier:        kvtier.Device,
		})
		ch := kids[b.hash]
		slices.SortFunc(ch, byHash)
		for i := len(ch) - 1; i >= 0; i-- {
			stack = append(stack, ch[i])
		}
	}
	return out
}
