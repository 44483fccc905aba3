// Package tiertest is the contract every kvbm.Tier passes: one suite, run
// against each implementation (host memory, disk, object store), so the
// tiers cannot drift apart in what Put, Get, eviction and the change
// stream promise.
package tiertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"switchyard.dev/libs/kvbm"
)

// Config is what a tier under test is opened with.
type Config struct {
	Blocks     int
	BlockBytes int
	OnChange   kvbm.OnChange
}

// Open opens a fresh, empty tier for one subtest.
type Open func(t *testing.T, cfg Config) kvbm.Tier

// Recorder applies a tier's changes to a set, as the router's index does.
type Recorder struct {
	mu     sync.Mutex
	held   map[uint64]kvbm.Meta
	stored int
	errs   []string
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{held: map[uint64]kvbm.Meta{}} }

// OnChange is the recorder's kvbm.OnChange.
func (r *Recorder) OnChange(c kvbm.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch c.Kind {
	case kvbm.Stored:
		if _, dup := r.held[c.Meta.Hash]; dup {
			r.errs = append(r.errs, fmt.Sprintf("Stored %#x twice", c.Meta.Hash))
		}
		r.held[c.Meta.Hash] = c.Meta
		r.stored++
	case kvbm.Removed:
		if _, ok := r.held[c.Meta.Hash]; !ok {
			r.errs = append(r.errs, fmt.Sprintf("Removed %#x, never stored", c.Meta.Hash))
		}
		delete(r.held, c.Meta.Hash)
	}
}

// Check fails t unless the recorded set equals the tier's blocks and the
// change stream was consistent.
func (r *Recorder) Check(t *testing.T, tier kvbm.Tier) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
	got := map[uint64]bool{}
	for _, m := range tier.Blocks() {
		got[m.Hash] = true
		if _, ok := r.held[m.Hash]; !ok {
			t.Errorf("tier holds %#x, never announced", m.Hash)
		}
	}
	for h := range r.held {
		if !got[h] {
			t.Errorf("announced %#x, tier does not hold it", h)
		}
	}
	if s := tier.Stats(); s.Blocks != len(got) {
		t.Errorf("Stats().Blocks = %d; Blocks() lists %d", s.Blocks, len(got))
	}
}

// Data returns block i's deterministic test bytes.
func Data(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*131 + j*7 + j>>8)
	}
	return b
}

// Meta returns block i's test meta.
func Meta(i int) kvbm.Meta {
	return kvbm.Meta{Hash: uint64(i)*0x9e3779b97f4a7c15 | 1, Parent: uint64(i), Tokens: []uint32{uint32(i), uint32(i) + 1}}
}

// Run runs the contract against open.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		f    func(*testing.T, Open)
	}{
		{"PutGet", testPutGet},
		{"Dedup", testDedup},
		{"Evicts least recently used", testLRU},
		{"Prefix", testPrefix},
		{"Bad sizes", testBadSizes},
		{"Concurrent", testConcurrent},
		{"Closed", testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.f(t, open)
		})
	}
}

const blockBytes = 4096 + 123 // not a multiple of a page: alignment is the tier's job

func testPutGet(t *testing.T, open Open) {
	rec := NewRecorder()
	tier := open(t, Config{Blocks: 8, BlockBytes: blockBytes, OnChange: rec.OnChange})
	for i := range 5 {
		if ok, err := tier.Put(t.Context(), Meta(i), Data(i, blockBytes)); err != nil || !ok {
			t.Fatalf("Put %d: %v, %v", i, ok, err)
		}
	}
	dst := make([]byte, blockBytes)
	for i := range 5 {
		m, err := tier.Get(t.Context(), Meta(i).Hash, dst)
		if err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
		if !bytes.Equal(dst, Data(i, blockBytes)) {
			t.Fatalf("Get %d: the bytes differ from those put", i)
		}
		if want := Meta(i); m.Hash != want.Hash || m.Parent != want.Parent || !slices.Equal(m.Tokens, want.Tokens) {
			t.Fatalf("Get %d: meta %+v, want %+v", i, m, want)
		}
	}
	if _, err := tier.Get(t.Context(), 42, dst); !errors.Is(err, kvbm.ErrNotFound) {
		t.Fatalf("Get of a block never put: %v; want ErrNotFound", err)
	}
	s := tier.Stats()
	if s.Puts != 5 || s.Hits != 5 || s.Misses != 1 || s.Blocks != 5 || s.BytesIn != 5*blockBytes || s.BytesOut != 5*blockBytes {
		t.Errorf("stats %+v; want 5 puts, 5 hits, 1 miss, 5 blocks, %d bytes each way", s, 5*blockBytes)
	}
	rec.Check(t, tier)
}

func testDedup(t *testing.T, open Open) {
	rec := NewRecorder()
	tier := open(t, Config{Blocks: 4, BlockBytes: blockBytes, OnChange: rec.OnChange})
	for range 3 {
		if _, err := tier.Put(t.Context(), Meta(1), Data(1, blockBytes)); err != nil {
			t.Fatal(err)
		}
	}
	if s := tier.Stats(); s.Puts != 1 || s.Dedups != 2 || rec.stored != 1 {
		t.Errorf("three Puts of one block: %d writes, %d dedups, %d Stored; want 1, 2, 1", s.Puts, s.Dedups, rec.stored)
	}
	rec.Check(t, tier)
}

func testLRU(t *testing.T, open Open) {
	rec := NewRecorder()
	tier := open(t, Config{Blocks: 3, BlockBytes: blockBytes, OnChange: rec.OnChange})
	put := func(i int) {
		t.Helper()
		if _, err := tier.Put(t.Context(), Meta(i), Data(i, blockBytes)); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	put(1)
	put(2)
	if _, err := tier.Get(t.Context(), Meta(0).Hash, make([]byte, blockBytes)); err != nil { // 0 is now the most recent
		t.Fatal(err)
	}
	put(3) // evicts 1
	if got := tier.Prefix([]uint64{Meta(1).Hash}); got != 0 {
		t.Error("the least recently used block survived an eviction")
	}
	for _, i := range []int{0, 2, 3} {
		if tier.Prefix([]uint64{Meta(i).Hash}) != 1 {
			t.Errorf("block %d was evicted; only block 1 should be", i)
		}
	}
	if s := tier.Stats(); s.Evictions != 1 {
		t.Errorf("%d evictions; want 1", s.Evictions)
	}
	rec.Check(t, tier)
}

func testPrefix(t *testing.T, open Open) {
	tier := open(t, Config{Blocks: 8, BlockBytes: blockBytes})
	for _, i := range []int{0, 1, 2, 4} {
		if _, err := tier.Put(t.Context(), Meta(i), Data(i, blockBytes)); err != nil {
			t.Fatal(err)
		}
	}
	hashes := []uint64{Meta(0).Hash, Meta(1).Hash, Meta(2).Hash, Meta(3).Hash, Meta(4).Hash}
	if got := tier.Prefix(hashes); got != 3 {
		t.Errorf("Prefix = %d; want 3 (the fourth is missing)", got)
	}
	if got := tier.Prefix(nil); got != 0 {
		t.Errorf("Prefix(nil) = %d", got)
	}
}

func testBadSizes(t *testing.T, open Open) {
	tier := open(t, Config{Blocks: 2, BlockBytes: blockBytes})
	if _, err := tier.Put(t.Context(), Meta(0), make([]byte, blockBytes-1)); err == nil {
		t.Error("Put of a short block succeeded")
	}
	if _, err := tier.Get(t.Context(), Meta(0).Hash, make([]byte, blockBytes+1)); err == nil {
		t.Error("Get into a long buffer succeeded")
	}
}

// Readers and writers at once: every read returns the bytes of the block
// it asked for, or ErrNotFound, never another block's or torn bytes.
func testConcurrent(t *testing.T, open Open) {
	rec := NewRecorder()
	tier := open(t, Config{Blocks: 6, BlockBytes: blockBytes, OnChange: rec.OnChange})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			dst := make([]byte, blockBytes)
			for n := range 200 {
				i := (n*7 + w*3) % 16
				if w%2 == 0 {
					if _, err := tier.Put(ctx, Meta(i), Data(i, blockBytes)); err != nil && !errors.Is(err, kvbm.ErrFull) {
						errs <- err
						return
					}
					continue
				}
				_, err := tier.Get(ctx, Meta(i).Hash, dst)
				switch {
				case errors.Is(err, kvbm.ErrNotFound):
				case err != nil:
					errs <- err
					return
				case !bytes.Equal(dst, Data(i, blockBytes)):
					errs <- fmt.Errorf("block %d read back other bytes", i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rec.Check(t, tier)
}

func testClosed(t *testing.T, open Open) {
	tier := open(t, Config{Blocks: 2, BlockBytes: blockBytes})
	if err := tier.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tier.Put(t.Context(), Meta(0), Data(0, blockBytes)); !errors.Is(err, kvbm.ErrClosed) {
		t.Errorf("Put after Close: %v; want ErrClosed", err)
	}
	if _, err := tier.Get(t.Context(), Meta(0).Hash, make([]byte, blockBytes)); !errors.Is(err, kvbm.ErrClosed) {
		t.Errorf("Get after Close: %v; want ErrClosed", err)
	}
	if err := tier.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
