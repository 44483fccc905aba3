package kvcache

import (
	"errors"
	"testing"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
)

const bs = 4

func newManager(t testing.TB, n int) *Manager {
	t.Helper()
	m, err := New(Config{NumBlocks: n, BlockSize: bs, BlockBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func toks(start, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(start + i)
	}
	return out
}

// fill allocates and commits a sequence's full blocks, returning ids and
// hashes.
func fill(t *testing.T, m *Manager, tokens []uint32) ([]int, []uint64) {
	t.Helper()
	hashes := kvhash.BlockHashes(tokens, bs, 0)
	ids, err := m.Allocate(len(hashes))
	if err != nil {
		t.Fatal(err)
	}
	parent := kvhash.Root
	for i, id := range ids {
		m.Commit(id, parent, hashes[i], tokens[i*bs:(i+1)*bs])
		parent = hashes[i]
	}
	return ids, hashes
}

func TestAllocateRelease(t *testing.T) {
	t.Parallel()
	m := newManager(t, 4)
	ids, err := m.Allocate(3)
	if err != nil || len(ids) != 3 || m.Used() != 3 || m.Available() != 1 {
		t.Fatalf("ids %v err %v used %d", ids, err, m.Used())
	}
	if _, err := m.Allocate(2); !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("err = %v, want ErrOutOfBlocks", err)
	}
	if m.Used() != 3 {
		t.Fatal("failed allocate had side effects")
	}
	m.Release(ids)
	m.Release(ids) // double release is ignored
	if m.Used() != 0 || m.Available() != 4 {
		t.Fatalf("used %d available %d", m.Used(), m.Available())
	}
	if off, ln := m.BlockRegion(2); off != 128 || ln != 64 || len(m.Arena()) != 256 {
		t.Fatalf("region %d %d arena %d", off, ln, len(m.Arena()))
	}
}

func TestPrefixReuseAndEvents(t *testing.T) {
	t.Parallel()
	m := newManager(t, 8)
	seq := toks(10, 12)
	ids, hashes := fill(t, m, seq)
	ev := m.TakeEvents()
	if len(ev) != 1 || ev[0].Kind != kvevent.Stored || len(ev[0].BlockHashes) != 3 || ev[0].ParentHash != kvhash.Root || len(ev[0].TokenIDs) != 12 {
		t.Fatalf("events %+v", ev)
	}
	m.Release(ids)
	if m.Cached() != 3 || m.Available() != 8 {
		t.Fatalf("cached %d available %d", m.Cached(), m.Available())
	}
	// A second sequence sharing two blocks.
	other := append(toks(10, 8), toks(99, 4)...)
	oh := kvhash.BlockHashes(other, bs, 0)
	matched, evictable := m.Probe(oh)
	if matched != 2 || evictable != 2 {
		t.Fatalf("probe = %d, %d", matched, evictable)
	}
	got, err := m.Acquire(oh[:2])
	if err != nil || got[0] != ids[0] || got[1] != ids[1] {
		t.Fatalf("acquire = %v, %v", got, err)
	}
	if _, err := m.Acquire(oh); err == nil {
		t.Fatal("acquiring an uncached hash must fail")
	}
	_ = hashes
}

func TestEvictLeafFirst(t *testing.T) {
	t.Parallel()
	m := newManager(t, 4)
	ids, hashes := fill(t, m, toks(0, 12)) // 3 blocks, chain a<-b<-c
	m.Release(ids)
	m.TakeEvents()
	// Need 2 blocks: 1 free + evict one, which must be the leaf.
	if _, err := m.Allocate(2); err != nil {
		t.Fatal(err)
	}
	ev := m.TakeEvents()
	if len(ev) != 1 || ev[0].Kind != kvevent.Removed || ev[0].BlockHashes[0] != hashes[2] {
		t.Fatalf("evicted %+v, want leaf %#x", ev, hashes[2])
	}
	if n, _ := m.Probe(hashes); n != 2 {
		t.Fatalf("prefix of %d left, want 2", n)
	}
}

func TestDuplicateCommit(t *testing.T) {
	t.Parallel()
	m := newManager(t, 4)
	tokens := toks(0, 4)
	h := kvhash.Chain(kvhash.Root, tokens, 0)
	ids, _ := m.Allocate(2)
	if !m.Commit(ids[0], kvhash.Root, h, tokens) || m.Commit(ids[1], kvhash.Root, h, tokens) {
		t.Fatal("first commit must win, second must not")
	}
	m.Release(ids)
	if m.Cached() != 1 || m.Available() != 4 {
		t.Fatalf("cached %d available %d", m.Cached(), m.Available())
	}
}

func TestSnapshotParentFirst(t *testing.T) {
	t.Parallel()
	m := newManager(t, 16)
	a, _ := fill(t, m, toks(0, 12))
	b, _ := fill(t, m, append(toks(0, 8), toks(50, 8)...)) // shares 2, adds 2 (dups rejected)
	m.Release(a)
	m.Release(b)
	snap := m.Snapshot()
	seen := map[uint64]bool{kvhash.Root: true}
	for _, e := range snap {
		if !seen[e.ParentHash] {
			t.Fatalf("child %#x before its parent %#x", e.BlockHashes[0], e.ParentHash)
		}
		seen[e.BlockHashes[0]] = true
	}
	if len(snap) != m.Cached() || len(snap) != 5 {
		t.Fatalf("snapshot has %d events, cache %d", len(snap), m.Cached())
	}
}

func TestClear(t *testing.T) {
	t.Parallel()
	m := newManager(t, 8)
	ids, _ := fill(t, m, toks(0, 8))
	held, _ := fill(t, m, toks(100, 8))
	m.Release(ids)
	m.TakeEvents()
	m.Clear()
	if m.Cached() != 0 || m.Used() != 2 {
		t.Fatalf("cached %d used %d", m.Cached(), m.Used())
	}
	if ev := m.TakeEvents(); len(ev) != 1 || ev[0].Kind != kvevent.Cleared {
		t.Fatalf("events %+v", ev)
	}
	m.Release(held)
	if m.Available() != 8 {
		t.Fatalf("available %d", m.Available())
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{{}, {NumBlocks: 1}, {NumBlocks: 1, BlockSize: 1, BlockBytes: -1}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
}

// BenchmarkAllocator measures an allocate/commit/release cycle of one
// block with eviction pressure: ops/s = 1e9 / ns/op.
func BenchmarkAllocator(b *testing.B) {
	m := newManager(b, 1024)
	tokens := toks(0, bs)
	var parent uint64 = 1
	b.ReportAllocs()
	for b.Loop() {
		ids, err := m.Allocate(1)
		if err != nil {
			b.Fatal(err)
		}
		parent++
		m.Commit(ids[0], 0, parent, tokens)
		m.Release(ids)
		if len(m.events) > 1024 {
			m.TakeEvents()
		}
	}
}

func BenchmarkPrefixHit(b *testing.B) {
	m := newManager(b, 1024)
	tokens := toks(0, bs*64)
	hashes := kvhash.BlockHashes(tokens, bs, 0)
	ids, _ := m.Allocate(64)
	for i, id := range ids {
		p := kvhash.Root
		if i > 0 {
			p = hashes[i-1]
		}
		m.Commit(id, p, hashes[i], tokens[i*bs:(i+1)*bs])
	}
	m.Release(ids)
	for b.Loop() {
		got, _ := m.Acquire(hashes)
		m.Release(got)
	}
}

// A child evicted after its parent's hash was evicted (the LRU fallback)
// and cached again in another block takes nothing from the new parent's
// count: that block never counted it, and its own child must keep it
// from being picked as a childless victim.
func TestOrphanEvictionKeepsNewParentCount(t *testing.T) {
	t.Parallel()
	m := newManager(t, 8)
	tokens := toks(0, 3*bs)
	hashes := kvhash.BlockHashes(tokens, bs, 0)
	ids, err := m.Allocate(2)
	if err != nil {
		t.Fatal(err)
	}
	x, c := ids[0], ids[1]
	m.Commit(x, kvhash.Root, hashes[0], tokens[:bs])
	m.Commit(c, hashes[0], hashes[1], tokens[bs:2*bs])
	m.uncache(int32(x)) // the parent goes first, as the fallback may do
	ids, err = m.Allocate(2)
	if err != nil {
		t.Fatal(err)
	}
	y, d := ids[0], ids[1]
	m.Commit(y, kvhash.Root, hashes[0], tokens[:bs]) // cached again elsewhere
	other := kvhash.BlockHashes(append(toks(0, bs), toks(500, bs)...), bs, 0)
	m.Commit(d, hashes[0], other[1], toks(500, bs)) // y's own child
	if got := m.blocks[y].children; got != 1 {
		t.Fatalf("new parent counts %d children, want 1", got)
	}
	m.uncache(int32(c)) // the orphan goes
	if got := m.blocks[y].children; got != 1 {
		t.Fatalf("after the orphan's eviction the new parent counts %d children, want 1 (its own child is cached)", got)
	}
	m.uncache(int32(d))
	if got := m.blocks[y].children; got != 0 {
		t.Fatalf("after its child's eviction the parent counts %d, want 0", got)
	}
}

func TestTrackCommitted(t *testing.T) {
	t.Parallel()
	m, err := New(Config{NumBlocks: 4, BlockSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := m.Allocate(3)
	m.Commit(ids[0], 0, 10, []uint32{1, 2})
	if got := m.TakeCommitted(); got != nil {
		t.Fatalf("committed before tracking: %v", got)
	}
	m.TrackCommitted()
	m.Commit(ids[1], 10, 11, []uint32{3, 4})
	m.Commit(ids[2], 11, 12, []uint32{5, 6})
	got := m.TakeCommitted()
	if len(got) != 2 || got[0].Hash != 11 || got[1].Hash != 12 || got[0].Parent != 10 || got[1].Tokens[1] != 6 {
		t.Fatalf("committed = %+v; want blocks 11 then 12, in commit order, with parents and tokens", got)
	}
	if m.TakeCommitted() != nil {
		t.Fatal("TakeCommitted twice returned the blocks twice")
	}
	if !m.Caches(got[0].ID, 11) || m.Caches(got[0].ID, 99) || m.Caches(-1, 11) {
		t.Fatal("Caches: want true for the cached hash only")
	}
	// A block evicted and reused for another hash before its turn is not
	// returned under its old one.
	m.Release(ids)
	fresh, _ := m.Allocate(4) // evicts everything cached
	m.Commit(fresh[0], 0, 20, []uint32{7, 8})
	for _, c := range m.TakeCommitted() {
		if c.Hash != 20 {
			t.Fatalf("committed %+v; want only the new block 20", c)
		}
	}
}
