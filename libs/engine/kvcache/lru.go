package kvcache

// The evictable list is intrusive (links live in blockMeta) so that
// touching a block on a prefix hit is O(1) and allocation-free.

const none = -1

func (m *Manager) lruPush(id int32) {
	b := &m.blocks[id]
	b.prev, b.next = m.lruTail, none
	if m.lruTail != none {
		m.blocks[m.lruTail].next = id
	} else {
		m.lruHead = id
	}
	m.lruTail = id
	b.inLRU = true
	m.nEvictable++
}

func (m *Manager) lruRemove(id int32) {
	b := &m.blocks[id]
	if b.prev != none {
		m.blocks[b.prev].next = b.next
	} else {
		m.lruHead = b.next
	}
	if b.next != none {
		m.blocks[b.next].prev = b.prev
	} else {
		m.lruTail = b.prev
	}
	b.prev, b.next, b.inLRU = none, none, false
	m.nEvictable--
}

// maxLeafScan bounds the search for a childless victim; past it the least
// recently used block goes even if it orphans descendants (they stay
// cached and are evicted in turn, the router just sees them later).
const maxLeafScan = 64

// victim picks the least recently used evictable block that has no cached
// children, so chains are evicted from the leaf towards the root.
func (m *Manager) victim() int32 {
	id := m.lruHead
	for i := 0; id != none && i < maxLeafScan; i++ {
		if m.blocks[id].children == 0 {
			return id
		}
		id = m.blocks[id].next
	}
	return m.lruHead
}
