package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/sharedtest"
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

// TestMergeMatchesRunC: the test vocabulary, a vocabulary where every
// merge scores the same (ties decided by position alone), and
// stories260K's tokenizer when ../shared has it, over texts of many
// shapes.
func TestMergeMatchesRunC(t *testing.T) {
	t.Parallel()
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
	toks := []*BPE{mini, ties}
	texts := []string{"", "a", "ab", "aaaaaaa", "abababab", " ab ab abc", "Once upon a time, there was a little girl.", "naïve 日本 🙂"}
	if dir, ok := sharedtest.Optional(t, sharedtest.Stories260K); ok {
		stories, err := LoadBPEFile(filepath.Join(dir, "tok512.bin"), 512)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, stories)
		readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
		texts = append(texts, string(readme))
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 50 {
		var b strings.Builder
		for range r.IntN(200) {
			b.WriteByte(" abcé\n"[r.IntN(6)])
		}
		texts = append(texts, b.String())
	}
	for _, tok := range toks {
		for _, text := range texts {
			checkMerge(t, tok, text)
		}
	}
}

// FuzzMerge holds merge to run.c's loop on stories260K's tokenizer.
func FuzzMerge(f *testing.F) {
	stories, err := LoadBPEFile(filepath.Join(sharedtest.Path(f, sharedtest.Stories260K), "tok512.bin"), 512)
	if err != nil {
		f.Fatal("stories260K tokenizer:", err)
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
	tok, err := LoadBPEFile(filepath.Join(sharedtest.Path(b, sharedtest.Stories260K), "tok512.bin"), 512)
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
// n/MaxPieceBytes tokens, BOS included (the frontend refuses longer texts
// by it), also where BOS merges with the text; a vocabulary whose byte
// fallbacks have no pieces states no bound.
func TestMaxPieceBytesBound(t *testing.T) {
	t.Parallel()
	bytesTok, err := NewBytes(512)
	if err != nil {
		t.Fatal(err)
	}
	pieces, scores := miniVocab()
	// BOS merges with the leading space and the text ("<s> ", "<s> a"),
	// so it stands for no token of its own.
	bosMerge, err := ParseBPE(buildBPE(append(pieces, "<s> ", "<s> a", "aa", "aaaa", "aaaaaaaa"), append(scores, 10, 9, 8, 7, 6)), len(pieces)+5)
	if err != nil {
		t.Fatal(err)
	}
	toks := []Tokenizer{bytesTok, bosMerge}
	if dir, ok := sharedtest.Optional(t, sharedtest.Stories260K); ok {
		stories, err := LoadBPEFile(filepath.Join(dir, "tok512.bin"), 512)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, stories)
	}
	r := rand.New(rand.NewPCG(9, 10))
	texts := []string{"", "a", strings.Repeat("a", 16385), strings.Repeat("the ", 300), strings.Repeat("Once upon a time ", 50), "naïve 日本 🙂"}
	for range 30 {
		b := make([]byte, r.IntN(500))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		texts = append(texts, string(b))
	}
	for _, tok := range toks {
		if tok.MaxPieceBytes() <= 0 {
			t.Fatalf("%T states no bound", tok)
		}
		for _, text := range texts {
			n := len(tok.Encode(text, true, false))
			if bound := (len(text) + tok.MaxPieceBytes() - 1) / tok.MaxPieceBytes(); n < bound {
				t.Fatalf("%T: %.30q (%d bytes) encodes to %d tokens, under the bound %d", tok, text, len(text), n, bound)
			}
		}
	}
	// Byte fallbacks without pieces: a vocabulary of 3 control tokens and
	// "x" (ids 3+ are byte tokens with no piece) states no bound.
	small, err := ParseBPE(buildBPE([]string{"<unk>", "<s>", "</s>", "x"}, []float32{0, 0, 0, 1}), 4)
	if err != nil {
		t.Fatal(err)
	}
	if small.MaxPieceBytes() != 0 {
		t.Fatalf("a vocabulary without byte pieces states a bound of %d", small.MaxPieceBytes())
	}
}
