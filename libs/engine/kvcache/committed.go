package kvcache

// Tracking committed blocks lets a tier below the arena copy each cached
// block as soon as it holds its KV: Commit queues it here, and the engine
// offloads it if it is still cached when its turn comes (see libs/kvbm).
// Copying at commit rather than at eviction means a block is in the lower
// tiers by the time another request, or another worker through a shared
// tier, wants it, and eviction never waits for a copy. The queue is off
// unless TrackCommitted is called.

// CommittedBlock is a block that cached a hash.
type CommittedBlock struct {
	ID     int
	Hash   uint64
	Parent uint64
	Tokens []uint32
}

// TrackCommitted starts queueing the blocks that Commit caches.
func (m *Manager) TrackCommitted() { m.trackCommitted = true }

// TakeCommitted returns the queued blocks that still cache the hash they
// were committed with, each once, in commit order, and empties the queue.
func (m *Manager) TakeCommitted() []CommittedBlock {
	if len(m.committed) == 0 {
		return nil
	}
	out := make([]CommittedBlock, 0, len(m.committed))
	seen := make(map[int32]bool, len(m.committed))
	for _, c := range m.committed {
		b := &m.blocks[c.id]
		if seen[c.id] || !b.hashed || b.hash != c.hash {
			continue
		}
		seen[c.id] = true
		out = append(out, CommittedBlock{ID: int(c.id), Hash: b.hash, Parent: b.parent, Tokens: append([]uint32(nil), b.tokens...)})
	}
	m.committed = m.committed[:0]
	return out
}

type commit struct {
	id   int32
	hash uint64
}

// Caches reports whether block id still caches hash.
func (m *Manager) Caches(id int, hash uint64) bool {
	if id < 0 || id >= len(m.blocks) {
		return false
	}
	b := &m.blocks[id]
	return b.hashed && b.hash == hash
}
