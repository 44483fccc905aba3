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
// one reference. Finish with CommitImported, or Release the ids to abort.
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
// emits Stored events and drops the import's references, leaving the
// blocks cached for the request that will hit them. On error nothing
// changes.
func (m *Manager) CommitImported(blocks []int, parent uint64, hashes []uint64, tokens []uint32) error {
	bs := m.cfg.BlockSize
	if len(tokens) != len(blocks)*bs || len(hashes) != len(blocks) {
		return fmt.Errorf("kvcache: commit import: %d tokens and %d hashes for %d blocks of %d", len(tokens), len(hashes), len(blocks), bs)
	}
	for _, id := range blocks {
		if id < 0 || id >= len(m.blocks) || m.blocks[id].ref <= 0 {
			return fmt.Errorf("kvcache: commit import: block %d is not reserved", id)
		}
	}
	for i, id := range blocks {
		m.Commit(id, parent, hashes[i], tokens[i*bs:(i+1)*bs])
		parent = hashes[i]
	}
	m.Release(blocks)
	return nil
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
