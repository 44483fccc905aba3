package kvhash

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
)

func seqTokens(n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(i*7919 + 3)
	}
	return t
}

// TestGolden pins the numbers the router and engine must agree on. If this
// test fails, every deployed router index is invalidated: do not just
// update the constants.
func TestGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		tokens    []uint32
		blockSize int
		salt      uint64
		want      []uint64
	}{
		{"one block", []uint32{1, 2, 3, 4}, 4, 0, []uint64{0x6fc1ebd4f4d6ea31}},
		{"two blocks and tail", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, 0, []uint64{0x6fc1ebd4f4d6ea31, 0x3a14937fd5340c7a}},
		{"salted", []uint32{1, 2, 3, 4}, 4, 42, []uint64{0xcabc6cf291a3ba46}},
		{"short", []uint32{1, 2, 3}, 4, 0, []uint64{}},
		{"block of 16", seqTokens(32), 16, 0, []uint64{0x6d28889e35957c64, 0xc77e25a617fcd639}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := BlockHashes(tc.tokens, tc.blockSize, tc.salt)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d hashes %#x, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("hash %d = %#x, want %#x", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestLayout recomputes the documented byte layout by hand.
func TestLayout(t *testing.T) {
	t.Parallel()
	tokens := seqTokens(48)
	const bs, salt = 16, 7
	var parent uint64
	got := BlockHashes(tokens, bs, salt)
	for i := range 3 {
		raw := make([]byte, 0, 4*bs)
		for _, tok := range tokens[i*bs : (i+1)*bs] {
			raw = binary.LittleEndian.AppendUint32(raw, tok)
		}
		local := xxh3.HashSeed(raw, salt)
		want := local
		if i > 0 {
			var b [16]byte
			binary.LittleEndian.PutUint64(b[:8], parent)
			binary.LittleEndian.PutUint64(b[8:], local)
			want = xxh3.HashSeed(b[:], salt)
		}
		if got[i] != want {
			t.Fatalf("block %d: got %#x want %#x", i, got[i], want)
		}
		parent = want
	}
}

func TestAppendMatchesChain(t *testing.T) {
	t.Parallel()
	tokens := seqTokens(100)
	all := BlockHashes(tokens, 10, 0)
	// Resuming from the middle with the parent hash gives the same tail.
	tail := AppendBlockHashes(nil, all[4], tokens[50:], 10, 0)
	for i, h := range tail {
		if h != all[5+i] {
			t.Fatalf("block %d: %#x != %#x", 5+i, h, all[5+i])
		}
	}
	if BlockHashes(tokens, 0, 0) != nil {
		t.Fatal("non-positive block size must yield nil")
	}
}

func TestNoAllocs(t *testing.T) {
	tokens := seqTokens(64)
	dst := make([]uint64, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		dst = AppendBlockHashes(dst[:0], Root, tokens, 16, 0)
	})
	if allocs != 0 {
		t.Fatalf("AppendBlockHashes allocated %v times", allocs)
	}
}

func FuzzBlockHashes(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0}, 1, uint64(0))
	f.Fuzz(func(t *testing.T, raw []byte, bs int, salt uint64) {
		if bs <= 0 || bs > 64 {
			return
		}
		tokens := make([]uint32, len(raw)/4)
		for i := range tokens {
			tokens[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		hs := BlockHashes(tokens, bs, salt)
		if len(hs) != len(tokens)/bs {
			t.Fatalf("got %d hashes for %d tokens", len(hs), len(tokens))
		}
	})
}

func BenchmarkChain16(b *testing.B) {
	tokens := seqTokens(16)
	var h uint64 = 1
	b.ReportAllocs()
	for b.Loop() {
		h = Chain(h, tokens, 0)
	}
	_ = h
}

func BenchmarkBlockHashes(b *testing.B) {
	tokens := seqTokens(16 * 256)
	dst := make([]uint64, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendBlockHashes(dst[:0], Root, tokens, 16, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/block")
}
