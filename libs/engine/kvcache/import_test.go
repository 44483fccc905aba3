package kvcache

import (
	"errors"
	"slices"
	"testing"

	"switchyard.dev/libs/kvhash"
)

// importBlocks reserves len(tokens)/bs blocks and fills them as a remote
// writer would, returning their ids.
func importBlocks(t *testing.T, m *Manager, tokens []uint32) []int {
	t.Helper()
	regions, err := m.AllocateForImport(len(tokens) / bs)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, len(regions))
	for i, r := range regions {
		if r.Offset != r.Block*64 || r.Length != 64 {
			t.Fatalf("region %+v", r)
		}
		copy(m.Arena()[r.Offset:r.Offset+r.Length], []byte("remote kv"))
		ids[i] = r.Block
	}
	return ids
}

// TestImportHeldUntilReleased: committed imported blocks are cached, stay
// held by the importer (no eviction can take them) until it releases them,
// and then the pool is fully free again.
func TestImportHeldUntilReleased(t *testing.T) {
	t.Parallel()
	m := newManager(t, 4)
	tokens := toks(7, 2*bs)
	hashes := kvhash.BlockHashes(tokens, bs, 0)
	ids := importBlocks(t, m, tokens)
	held, err := m.CommitImported(ids, kvhash.Root, hashes, tokens)
	if err != nil || !slices.Equal(held, ids) {
		t.Fatalf("held %v (imported %v), err %v", held, ids, err)
	}
	if n, _ := m.Probe(hashes); n != 2 || m.Used() != 2 {
		t.Fatalf("matched %d used %d", n, m.Used())
	}
	// Everything else may be allocated, but nothing evicts the import.
	others, err := m.Allocate(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Allocate(1); !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("allocating past the import: %v, want ErrOutOfBlocks", err)
	}
	// The request that imported them acquires them as a prefix hit.
	seq, err := m.Acquire(hashes)
	if err != nil || !slices.Equal(seq, ids) {
		t.Fatalf("acquired %v, err %v", seq, err)
	}
	m.Release(held)
	m.Release(seq)
	m.Release(others)
	if m.Used() != 0 || m.Available() != 4 {
		t.Fatalf("used %d available %d after releasing everything", m.Used(), m.Available())
	}
	if n, _ := m.Probe(hashes); n != 2 {
		t.Fatalf("released import no longer cached: matched %d", n)
	}
}

// TestImportAlreadyCached: a block whose prefix another block caches
// already hands the caller that block; the imported copy is freed.
func TestImportAlreadyCached(t *testing.T) {
	t.Parallel()
	m := newManager(t, 8)
	tokens := toks(7, 3*bs)
	cached, hashes := fill(t, m, tokens[:bs])
	m.Release(cached)
	hashes = kvhash.AppendBlockHashes(hashes, hashes[0], tokens[bs:], bs, 0)
	ids := importBlocks(t, m, tokens)
	held, err := m.CommitImported(ids, kvhash.Root, hashes, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{cached[0], ids[1], ids[2]}; !slices.Equal(held, want) {
		t.Fatalf("held %v, want %v", held, want)
	}
	if m.Used() != 3 || m.Cached() != 3 {
		t.Fatalf("used %d cached %d", m.Used(), m.Cached())
	}
	m.Release(held)
	if m.Used() != 0 || m.Available() != 8 {
		t.Fatalf("used %d available %d", m.Used(), m.Available())
	}
}

// TestImportAbort: a refused commit changes nothing, and releasing the
// import's references frees every block.
func TestImportAbort(t *testing.T) {
	t.Parallel()
	m := newManager(t, 4)
	tokens := toks(7, 2*bs)
	hashes := kvhash.BlockHashes(tokens, bs, 0)
	ids := importBlocks(t, m, tokens)
	for name, commit := range map[string]func() ([]int, error){
		"token count": func() ([]int, error) { return m.CommitImported(ids[:1], kvhash.Root, hashes[:1], tokens) },
		"hash count":  func() ([]int, error) { return m.CommitImported(ids, kvhash.Root, hashes[:1], tokens) },
		"bad block":   func() ([]int, error) { return m.CommitImported([]int{ids[0], 9}, kvhash.Root, hashes, tokens) },
		"free block":  func() ([]int, error) { return m.CommitImported([]int{ids[0], 3}, kvhash.Root, hashes, tokens) },
		"same block twice": func() ([]int, error) {
			return m.CommitImported([]int{ids[0], ids[0]}, kvhash.Root, hashes, tokens)
		},
	} {
		if held, err := commit(); err == nil {
			t.Fatalf("%s: commit accepted, holding %v", name, held)
		}
		if m.Used() != 2 || m.Cached() != 0 {
			t.Fatalf("%s: a refused commit changed the pool: used %d cached %d", name, m.Used(), m.Cached())
		}
	}
	m.Release(ids)
	if m.Used() != 0 || m.Available() != 4 || m.Cached() != 0 {
		t.Fatalf("after abort: used %d available %d cached %d", m.Used(), m.Available(), m.Cached())
	}

	// Committed, then released: also fully free, and a second commit of
	// the same blocks is refused rather than handing out a second
	// reference.
	ids = importBlocks(t, m, tokens)
	held, err := m.CommitImported(ids, kvhash.Root, hashes, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CommitImported(ids, kvhash.Root, hashes, tokens); err == nil {
		t.Fatal("committing twice must fail")
	}
	m.Release(held)
	if _, err := m.CommitImported(ids, kvhash.Root, hashes, tokens); err == nil {
		t.Fatal("committing released blocks must fail")
	}
	if m.Used() != 0 || m.Available() != 4 {
		t.Fatalf("after release: used %d available %d", m.Used(), m.Available())
	}
}
