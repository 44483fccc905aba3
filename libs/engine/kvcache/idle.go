package kvcache

// Tracking idle blocks lets a tier below the arena copy a cached block
// while it is still cached: when its last reference goes (it becomes
// evictable), the block is queued here, and the engine offloads it if it
// is still cached when its turn comes (see libs/kvbm). The queue is off
// unless TrackIdle is called.

// IdleBlock is a cached block that became evictable.
type IdleBlock struct {
	ID     int
	Hash   uint64
	Parent uint64
	Tokens []uint32
}

// TrackIdle starts queueing the cached blocks that become evictable.
func (m *Manager) TrackIdle() { m.trackIdle = true }

// TakeIdle returns the queued blocks that are still cached and evictable,
// each once, and empties the queue.
func (m *Manager) TakeIdle() []IdleBlock {
	if len(m.idle) == 0 {
		return nil
	}
	out := make([]IdleBlock, 0, len(m.idle))
	seen := make(map[int32]bool, len(m.idle))
	for _, id := range m.idle {
		b := &m.blocks[id]
		if seen[id] || !b.hashed || b.ref != 0 {
			continue
		}
		seen[id] = true
		out = append(out, IdleBlock{ID: int(id), Hash: b.hash, Parent: b.parent, Tokens: append([]uint32(nil), b.tokens...)})
	}
	m.idle = m.idle[:0]
	return out
}

// Caches reports whether block id still caches hash.
func (m *Manager) Caches(id int, hash uint64) bool {
	if id < 0 || id >= len(m.blocks) {
		return false
	}
	b := &m.blocks[id]
	return b.hashed && b.hash == hash
}
