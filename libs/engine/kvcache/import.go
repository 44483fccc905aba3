package kvcache

import "fmt"

// Region is where a block's KV lives in the arena.
type Region struct {
	Block  int
	Offset int
	Length int
}

// AllocateForImport reserves n blocks whose KV another process will write
// (disaggregated prefill): it returns their arena regions, each held with
// one reference that the caller owns. Finish with CommitImported, or
// Release the ids to abort.
func (m *Manager) AllocateForImport(n int) ([]Region, error) {
	ids, err := m.Allocate(n)
	if err != nil {
		return nil, err
	}
	out := make([]Region, len(ids))
	for i, id := range ids {
		off, ln := m.BlockRegion(id)
		out[i] = Region{Block: id, Offset: off, Length: ln}
	}
	return out, nil
}

// CommitImported marks imported blocks as computed: blocks[i] holds the KV
// of tokens[i*BlockSize:(i+1)*BlockSize], whose chained hash is hashes[i]
// (kvhash.AppendBlockHashes from parent, kvhash.Root for a sequence
// start; the caller hashes, outside whatever lock guards the Manager). It
// emits Stored events.
//
// Ownership: the import's references stay with the caller, so the blocks
// cannot be evicted before the request that imported them holds them
// itself. CommitImported returns the blocks now caching hashes, in order,
// each held with one reference that the caller owns and Releases when
// done: blocks[i] itself, or, when another block already cached
// hashes[i], that block (the imported copy is freed). On error nothing
// changes: the caller still owns the references on blocks and Releases
// them to abort.
func (m *Manager) CommitImported(blocks []int, parent uint64, hashes []uint64, tokens []uint32) ([]int, error) {
	bs := m.cfg.BlockSize
	if len(tokens) != len(blocks)*bs || len(hashes) != len(blocks) {
		return nil, fmt.Errorf("kvcache: commit import: %d tokens and %d hashes for %d blocks of %d", len(tokens), len(hashes), len(blocks), bs)
	}
	seen := make(map[int]bool, len(blocks))
	for _, id := range blocks {
		if id < 0 || id >= len(m.blocks) || m.blocks[id].ref <= 0 {
			return nil, fmt.Errorf("kvcache: commit import: block %d is not reserved", id)
		}
		if m.blocks[id].hashed {
			return nil, fmt.Errorf("kvcache: commit import: block %d is already committed", id)
		}
		if seen[id] { // its second Commit would miss, and the reference go astray
			return nil, fmt.Errorf("kvcache: commit import: block %d appears twice", id)
		}
		seen[id] = true
	}
	held := make([]int, len(blocks))
	for i, id := range blocks {
		held[i] = id
		if !m.Commit(id, parent, hashes[i], tokens[i*bs:(i+1)*bs]) {
			// Cached already: hold the cached block and free the copy.
			// (With the blocks checked distinct and uncommitted above,
			// Commit fails only when the hash is cached.)
			c := m.cache[hashes[i]]
			m.ref(c)
			m.Release(blocks[i : i+1])
			held[i] = int(c)
		}
		parent = hashes[i]
	}
	return held, nil
}

// Pin takes a reference on the cached blocks of the leading hashes (the
// source side of a transfer) and returns their regions; blocks stay put
// until Release. It stops at the first hash that is not cached.
func (m *Manager) Pin(hashes []uint64) []Region {
	n, _ := m.Probe(hashes)
	ids, _ := m.Acquire(hashes[:n])
	out := make([]Region, len(ids))
	for i, id := range ids {
		off, ln := m.BlockRegion(id)
		out[i] = Region{Block: id, Offset: off, Length: ln}
	}
	return out
}
