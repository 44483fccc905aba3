// Package kvcache manages the paged KV cache: a fixed pool of fixed-size
// blocks, reference counted, with a prefix cache keyed by chained block
// hashes (package kvhash).
//
// Invariants: a block is either free (ref 0, no hash), held (ref > 0, with
// or without a hash) or evictable (ref 0, hashed, on the LRU list). A
// finished sequence's full blocks stay cached until their memory is needed;
// eviction takes the least recently used block without cached children, so
// a chain shrinks from its leaf. Every change to the set of cached hashes is
// reported as a kvevent.Event, collected until TakeEvents. The pool is the
// engine's own arena, so its events are in tier kvtier.Device.
//
// KV memory is one arena mapped outside the Go heap (see Arena); block b is
// Arena()[b*BlockBytes:(b+1)*BlockBytes]. The Manager is not safe for
// concurrent use: the engine serializes access.
package kvcache

import (
	"errors"
	"fmt"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
)

// ErrOutOfBlocks means fewer blocks are free or evictable than requested.
var ErrOutOfBlocks = errors.New("kvcache: out of KV blocks")

// Config sizes the pool.
type Config struct {
	NumBlocks  int
	BlockSize  int // tokens per block
	BlockBytes int // KV bytes per block; 0 keeps no memory (simulation)
	// Shared maps the arena as shared memory (arena.MapShared) that a
	// transfer agent's child process can map too: the UCX backend's
	// isolated mode.
	Shared bool
}

type blockMeta struct {
	ref      int32
	children int32  // cached blocks counted in this block's children (below)
	gen      uint32 // counts the hashes this block has cached
	counted  int32  // the parent block this one is counted in, or none
	pgen     uint32 // that parent's gen when it was counted
	prev     int32
	next     int32
	inLRU    bool
	hashed   bool
	hash     uint64
	parent   uint64
	tokens   []uint32
}

// Manager is the block pool and prefix cache.
type Manager struct {
	cfg            Config
	arena          []byte
	unmap          func() error
	blocks         []blockMeta
	free           []int32
	cache          map[uint64]int32
	lruHead        int32
	lruTail        int32
	nEvictable     int
	events         []kvevent.Event
	trackCommitted bool
	committed      []commit // blocks that cached a hash (TrackCommitted)
}

// New allocates the pool and, when BlockBytes > 0, its arena.
func New(cfg Config) (*Manager, error) {
	if cfg.NumBlocks <= 0 || cfg.BlockSize <= 0 || cfg.BlockBytes < 0 {
		return nil, fmt.Errorf("kvcache: invalid config %+v", cfg)
	}
	m := &Manager{
		cfg:     cfg,
		blocks:  make([]blockMeta, cfg.NumBlocks),
		free:    make([]int32, cfg.NumBlocks),
		cache:   make(map[uint64]int32),
		lruHead: none,
		lruTail: none,
		unmap:   func() error { return nil },
	}
	for i := range m.blocks {
		m.blocks[i].prev, m.blocks[i].next, m.blocks[i].counted = none, none, none
		m.free[i] = int32(cfg.NumBlocks - 1 - i) // pop order 0, 1, 2...
	}
	if cfg.BlockBytes > 0 {
		size := cfg.NumBlocks * cfg.BlockBytes
		if size/cfg.NumBlocks != cfg.BlockBytes {
			return nil, fmt.Errorf("kvcache: arena size overflows: %d blocks of %d bytes", cfg.NumBlocks, cfg.BlockBytes)
		}
		arena, unmap, err := mapArena(size, cfg.Shared)
		if err != nil {
			return nil, err
		}
		m.arena, m.unmap = arena, unmap
	}
	return m, nil
}

// Close releases the arena. The manager must not be used afterwards.
func (m *Manager) Close() error {
	err := m.unmap()
	m.arena, m.unmap = nil, func() error { return nil }
	return err
}

// Arena returns the KV memory (nil without BlockBytes).
func (m *Manager) Arena() []byte { return m.arena }

// BlockRegion returns block id's byte offset and length in the arena.
func (m *Manager) BlockRegion(id int) (offset, length int) {
	return id * m.cfg.BlockBytes, m.cfg.BlockBytes
}

// Config returns the pool's configuration.
func (m *Manager) Config() Config { return m.cfg }

// NumBlocks is the pool size.
func (m *Manager) NumBlocks() int { return m.cfg.NumBlocks }

// BlockSize is the number of tokens per block.
func (m *Manager) BlockSize() int { return m.cfg.BlockSize }

// Available counts blocks that Allocate can hand out (free or evictable).
func (m *Manager) Available() int { return len(m.free) + m.nEvictable }

// Used counts blocks held by at least one sequence.
func (m *Manager) Used() int { return m.cfg.NumBlocks - m.Available() }

// Cached counts blocks whose hash is in the prefix cache.
func (m *Manager) Cached() int { return len(m.cache) }

// Probe returns how many leading hashes are cached and how many of those
// blocks are currently evictable (acquiring them shrinks Available).
func (m *Manager) Probe(hashes []uint64) (matched, evictable int) {
	for _, h := range hashes {
		id, ok := m.cache[h]
		if !ok {
			break
		}
		matched++
		if m.blocks[id].ref == 0 {
			evictable++
		}
	}
	return matched, evictable
}

// Acquire takes a reference on the cached blocks of hashes, which must all
// be cached (see Probe), and returns their ids.
func (m *Manager) Acquire(hashes []uint64) ([]int, error) {
	ids := make([]int, 0, len(hashes))
	for _, h := range hashes {
		id, ok := m.cache[h]
		if !ok {
			m.Release(ids)
			return nil, fmt.Errorf("kvcache: acquire %#x: not cached", h)
		}
		m.ref(id)
		ids = append(ids, int(id))
	}
	return ids, nil
}

func (m *Manager) ref(id int32) {
	b := &m.blocks[id]
	if b.ref == 0 && b.inLRU {
		m.lruRemove(id)
	}
	b.ref++
}

// Allocate returns n fresh blocks with one reference each, evicting cached
// blocks as needed. It fails without side effects when fewer than n are
// available.
func (m *Manager) Allocate(n int) ([]int, error) {
	return m.AppendAllocate(nil, n)
}

// AppendAllocate is Allocate appending to dst.
func (m *Manager) AppendAllocate(dst []int, n int) ([]int, error) {
	if n > m.Available() {
		return dst, fmt.Errorf("%w: want %d, %d available of %d", ErrOutOfBlocks, n, m.Available(), m.cfg.NumBlocks)
	}
	for range n {
		var id int32
		if k := len(m.free); k > 0 {
			id = m.free[k-1]
			m.free = m.free[:k-1]
		} else {
			id = m.victim()
			m.lruRemove(id)
			m.uncache(id)
		}
		m.blocks[id].ref = 1
		dst = append(dst, int(id))
	}
	return dst, nil
}

// Release drops one reference on each block, last block first so that a
// sequence's tail becomes the least recently used part of its chain.
func (m *Manager) Release(ids []int) {
	for i := len(ids) - 1; i >= 0; i-- {
		id := int32(ids[i])
		b := &m.blocks[id]
		if b.ref <= 0 {
			continue // double release is a caller bug; never corrupt the pool
		}
		b.ref--
		if b.ref > 0 {
			continue
		}
		if b.hashed {
			m.lruPush(id)
		} else {
			m.free = append(m.free, id)
		}
	}
}

// Commit records that block id holds the computed KV of tokens, whose
// chained hash is hash and whose parent's is parent, making it reusable by
// later prefixes and emitting a Stored event. If another block already
// caches hash, id stays private (it is freed on release) and Commit
// returns false.
func (m *Manager) Commit(id int, parent, hash uint64, tokens []uint32) bool {
	b := &m.blocks[id]
	if b.hashed {
		return b.hash == hash
	}
	if _, dup := m.cache[hash]; dup {
		return false
	}
	b.hashed, b.hash, b.parent = true, hash, parent
	b.tokens = append(b.tokens[:0], tokens...)
	m.cache[hash] = int32(id)
	b.gen++
	b.counted = none
	if p, ok := m.cache[parent]; ok && parent != kvhash.Root {
		m.blocks[p].children++
		b.counted, b.pgen = p, m.blocks[p].gen
	}
	m.emitStored(parent, hash, tokens)
	if m.trackCommitted {
		m.committed = append(m.committed, commit{int32(id), hash})
	}
	return true
}

func (m *Manager) emitStored(parent, hash uint64, tokens []uint32) {
	if k := len(m.events); k > 0 {
		last := &m.events[k-1]
		if last.Kind == kvevent.Stored && last.BlockHashes[len(last.BlockHashes)-1] == parent {
			last.BlockHashes = append(last.BlockHashes, hash)
			last.TokenIDs = append(last.TokenIDs, tokens...)
			return
		}
	}
	m.events = append(m.events, kvevent.Event{
		Kind:        kvevent.Stored,
		BlockHashes: []uint64{hash},
		ParentHash:  parent,
		TokenIDs:    append([]uint32(nil), tokens...),
		BlockSize:   m.cfg.BlockSize,
		Tier:        kvtier.Device,
	})
}

// uncache removes id's hash from the prefix cache and reports it.
func (m *Manager) uncache(id int32) {
	b := &m.blocks[id]
	if !b.hashed {
		return
	}
	delete(m.cache, b.hash)
	// Only the parent block that counted this one, holding the same hash
	// as then: a parent evicted first (the LRU fallback) and cached again
	// did not count it, and must not lose one of the children it did.
	if p := b.counted; p != none && m.blocks[p].hashed && m.blocks[p].gen == b.pgen {
		m.blocks[p].children--
	}
	b.counted = none
	if k := len(m.events); k > 0 && m.events[k-1].Kind == kvevent.Removed {
		m.events[k-1].BlockHashes = append(m.events[k-1].BlockHashes, b.hash)
	} else {
		m.events = append(m.events, kvevent.Event{Kind: kvevent.Removed, BlockHashes: []uint64{b.hash}, Tier: kvtier.Device})
	}
	// Its children count goes too: a block evicted before its children (the
	// LRU fallback) would otherwise look like a parent under its next hash.
	b.hashed, b.hash, b.parent, b.tokens, b.children = false, 0, 0, b.tokens[:0], 0
}

// Clear empties the prefix cache: evictable blocks become free, held blocks
// stay with their owners but will not be shared. It emits Cleared.
func (m *Manager) Clear() {
	for id := m.lruHead; id != none; {
		next := m.blocks[id].next
		m.lruRemove(id)
		m.free = append(m.free, id)
		id = next
	}
	for i := range m.blocks {
		b := &m.blocks[i]
		b.hashed, b.hash, b.parent, b.tokens, b.children = false, 0, 0, b.tokens[:0], 0
	}
	clear(m.cache)
	m.events = append(m.events[:0], kvevent.Event{Kind: kvevent.Cleared})
}

// TakeEvents returns the events since the last call and forgets them.
func (m *Manager) TakeEvents() []kvevent.Event {
	ev := m.events
	m.events = nil
	return ev
}
