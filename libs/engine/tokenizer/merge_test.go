package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/internal/testmodel"
)

// mergeRunC is run.c's merge loop as it is written there: rescan every
// adjacent pair, merge the best (the first of equals), repeat. merge must
// give the same tokens.
func mergeRunC(t *BPE, tokens []uint32) []uint32 {
	for {
		best, bestID, bestIdx := float32(-1e10), uint32(0), -1
		for i := 0; i+1 < len(tokens); i++ {
			id, ok := t.index[t.Vocab(tokens[i])+t.Vocab(tokens[i+1])]
			if ok && t.scores[id] > best {
				best, bestID, bestIdx = t.scores[id], id, i
			}
		}
		if bestIdx < 0 {
			return tokens
		}
		tokens[bestIdx] = bestID
		tokens = append(tokens[:bestIdx+1], tokens[bestIdx+2:]...)
	}
}

func checkMerge(t *testing.T, tok *BPE, text string) {
	t.Helper()
	units := tok.appendCodePoints(nil, text)
	want := mergeRunC(tok, slices.Clone(units))
	if got := tok.merge(slices.Clone(units)); !slices.Equal(got, want) {
		t.Fatalf("%q: merge %v, run.c %v", text, got, want)
	}
}

// TestMergeMatchesRunC: stories260K's tokenizer, the test vocabulary, and a
// vocabulary where every merge scores the same (ties decided by position
// alone), over texts of many shapes.
func TestMergeMatchesRunC(t *testing.T) {
	t.Parallel()
	stories, err := LoadBPEFile(filepath.Join(testmodel.Stories(t), "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	pieces, scores := miniVocab()
	mini, err := ParseBPE(buildBPE(pieces, scores), len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	flat := slices.Repeat([]float32{1}, len(pieces))
	ties, err := ParseBPE(buildBPE(append(pieces, "aa", "aaa", "aaaa", "abab"), append(flat, 1, 1, 1, 1)), len(pieces)+4)
	if err != nil {
		t.Fatal(err)
	}
	readme, _ := os.ReadFile(filepath.Join(testmodel.Stories(t), "README.md"))
	r := rand.New(rand.NewPCG(7, 8))
	texts := []string{"", "a", "ab", "aaaaaaa", "abababab", " ab ab abc", "Once upon a time, there was a little girl.", "naïve 日本 🙂", string(readme)}
	for range 50 {
		var b strings.Builder
		for range r.IntN(200) {
			b.WriteByte(" abcé\n"[r.IntN(6)])
		}
		texts = append(texts, b.String())
	}
	for _, tok := range []*BPE{stories, mini, ties} {
		for _, text := range texts {
			checkMerge(t, tok, text)
		}
	}
}

// FuzzMerge holds merge to run.c's loop on stories260K's tokenizer.
func FuzzMerge(f *testing.F) {
	stories, err := LoadBPEFile(filepath.Join(testmodel.Find(testmodel.Stories260K), "tok512.bin"), 512)
	if err != nil {
		f.Skip("stories260K tokenizer:", err)
	}
	for _, s := range []string{"Once upon a time", "aaaa", "the the the", "naïve 日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 2000 {
			return
		}
		checkMerge(t, stories, text)
	})
}

// BenchmarkEncodeLong encodes 64 KiB of story text with stories260K's
// tokenizer (run.c's loop took ~n² pair lookups for it).
func BenchmarkEncodeLong(b *testing.B) {
	tok, err := LoadBPEFile(filepath.Join(testmodel.Stories(b), "tok512.bin"), 512)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside. ", 1000)[:64<<10]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, true, false)
	}
}

// TestMaxPieceBytesBound: n bytes of text never encode to fewer than
// n/MaxPieceBytes tokens (the frontend refuses longer texts by it).
func TestMaxPieceBytesBound(t *testing.T) {
	t.Parallel()
	stories, err := LoadBPEFile(filepath.Join(testmodel.Stories(t), "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	bytesTok, err := NewBytes(512)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	texts := []string{"", "a", strings.Repeat("the ", 300), strings.Repeat("Once upon a time ", 50), "naïve 日本 🙂"}
	for range 30 {
		b := make([]byte, r.IntN(500))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		texts = append(texts, string(b))
	}
	for _, tok := range []interface {
		Tokenizer
		MaxPieceBytes() int
	}{stories, bytesTok} {
		for _, text := range texts {
			n := len(tok.Encode(text, false, false))
			if bound := (len(text) + tok.MaxPieceBytes() - 1) / tok.MaxPieceBytes(); n < bound {
				t.Fatalf("%T: %q encodes to %d tokens, under the bound %d", tok, text, n, bound)
			}
		}
	}
}
