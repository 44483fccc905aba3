package tokenizer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestSPMEncode(t *testing.T) {
	t.Parallel()
	tok := mustVocab(t, spmFixture(t))
	tests := []struct {
		name, text string
		bos, eos   bool
		want       []string
	}{
		{"empty", "", false, false, nil},
		{"empty with BOS", "", true, false, []string{"<s>"}},
		{"dummy prefix", "hello", false, false, []string{"▁hello"}},
		{"two words", "hello world", true, true, []string{"<s>", "▁hello", "▁world", "</s>"}},
		{"leading space", " hello", false, false, []string{"▁", "▁hello"}},
		{"byte fallback", "hi\n", false, false, []string{"▁h", "<0x69>", "<0x0A>"}},
		{"multi-byte fallback", "ü", false, false, []string{"▁", "<0xC3>", "<0xBC>"}},
		{"code point in vocabulary", "é", false, false, []string{"▁", "é"}},
		{"ties go leftmost", "aaa", false, false, []string{"▁", "aa", "a"}},
		{"control text is text", "<|im_end|>", false, false, []string{"▁", "<", "<0x7C>", "<0x69>", "<0x6D>", "<0x5F>", "e", "<0x6E>", "d", "<0x7C>", ">"}},
		{"user-defined always matches", "a<tool>b", false, false, []string{"▁a", "<tool>", "▁", "b"}},
		{"U+2581 is a space", "▁hello", false, false, []string{"▁", "▁hello"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tok.Encode(tc.text, tc.bos, tc.eos)
			if want := ids(t, tok, tc.want...); !slices.Equal(got, want) {
				t.Errorf("Encode(%q) = %v, want %v %q", tc.text, got, want, tc.want)
			}
		})
	}
}

func TestByteLevelEncode(t *testing.T) {
	t.Parallel()
	gpt2 := mustVocab(t, byteLevelFixture(t, "gpt-2"))
	qwen := mustVocab(t, byteLevelFixture(t, "qwen2"))
	tests := []struct {
		name string
		tok  *VocabTokenizer
		text string
		want []string
	}{
		{"words", gpt2, "hello world", []string{"hello", "Ġworld"}},
		{"no dummy prefix", gpt2, " hello", []string{"Ġhello"}},
		{"spaces before a word", gpt2, "a    hello", []string{"a", "ĠĠ", "Ġ", "Ġhello"}},
		{"newlines split before a word", gpt2, "\n\nhello", []string{"Ċ", "Ċ", "hello"}},
		{"newlines", gpt2, "a\n\n", []string{"a", "ĊĊ"}},
		{"contraction", gpt2, "it's", []string{"i", "t", "'s"}},
		{"bytes of a code point", gpt2, "é", []string{"Ã©"}},
		{"gpt-2 digits stay together", gpt2, "123", []string{"123"}},
		{"qwen2 digits one by one", qwen, "123", []string{"1", "2", "3"}},
		{"control text is text", gpt2, "<|im_end|>", []string{"<", "|", "i", "m", "_", "e", "n", "d", "|", ">"}},
		{"user-defined always matches", gpt2, "x<tool>y", []string{"x", "<tool>", "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.tok.Encode(tc.text, false, false)
			if want := ids(t, tc.tok, tc.want...); !slices.Equal(got, want) {
				t.Errorf("Encode(%q) = %v, want %v %q", tc.text, got, want, tc.want)
			}
		})
	}
}

func TestEncodeSpecial(t *testing.T) {
	t.Parallel()
	v := byteLevelFixture(t, "qwen2")
	start, end, tool := uint32(slices.Index(v.Tokens, "<|im_start|>")), uint32(slices.Index(v.Tokens, "<|im_end|>")), uint32(slices.Index(v.Tokens, "<tool>"))
	stripped := v
	stripped.RStrip = []uint32{start}
	stripped.LStrip = []uint32{end}
	tests := []struct {
		name string
		v    Vocab
		text string
		want []string
	}{
		{"chat markers", v, "<|im_start|>hello<|im_end|>", []string{"<|im_start|>", "hello", "<|im_end|>"}},
		{"adjacent markers", v, "<|im_end|><|im_start|>", []string{"<|im_end|>", "<|im_start|>"}},
		{"user-defined too", v, "<tool><|im_end|>", []string{"<tool>", "<|im_end|>"}},
		{"strip whitespace beside", stripped, "<|im_start|> \n hello \t<|im_end|> ", []string{"<|im_start|>", "hello", "<|im_end|>", "Ġ"}},
		{"broken marker is text", v, "<|im_sta", []string{"<", "|", "i", "m", "_", "s", "t", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tok := mustVocab(t, tc.v)
			got := tok.EncodeSpecial(tc.text, false, false)
			if want := ids(t, tok, tc.want...); !slices.Equal(got, want) {
				t.Errorf("EncodeSpecial(%q) = %v, want %v %q", tc.text, got, want, tc.want)
			}
		})
	}
	_ = tool
}

// TestSpecialPriority: longer special tokens take the text first, then
// shorter ones what is left, whatever their positions (llama.cpp's
// order), and SentencePiece puts the dummy prefix after each special.
func TestSpecialPriority(t *testing.T) {
	t.Parallel()
	v := spmFixture(t)
	for _, s := range []string{"ab", "bab"} {
		v.Tokens = append(v.Tokens, "["+s+"]")
		v.Scores = append(v.Scores, 0)
		v.Types = append(v.Types, TokenControl)
	}
	v.Tokens = append(v.Tokens, "x[ab", "[ab]y")
	v.Scores = append(v.Scores, 0, 0)
	v.Types = append(v.Types, TokenControl, TokenControl)
	tok := mustVocab(t, v)
	// "[ab]y" (5 bytes) beats "x[ab" (4), which overlaps it.
	got := tok.EncodeSpecial("x[ab]y[bab]a", false, false)
	want := ids(t, tok, "▁", "<0x78>", "[ab]y", "[bab]", "▁a")
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestPiece(t *testing.T) {
	t.Parallel()
	spm := mustVocab(t, spmFixture(t))
	bpe := mustVocab(t, byteLevelFixture(t, "gpt-2"))
	tests := []struct {
		name        string
		tok         *VocabTokenizer
		prev, token string
		want        string
	}{
		{"SentencePiece space", spm, "▁", "▁hello", " hello"},
		{"leading space dropped after BOS", spm, "<s>", "▁hello", "hello"},
		{"byte token", spm, "▁", "<0x0A>", "\n"},
		{"control decodes to nothing", spm, "▁", "</s>", ""},
		{"unknown decodes to nothing", spm, "▁", "<unk>", ""},
		{"user-defined decodes to its text", spm, "▁", "<tool>", "<tool>"},
		{"byte-level", bpe, "a", "Ġworld", " world"},
		{"byte-level keeps space after BOS", bpe, "<|endoftext|>", "Ġworld", " world"},
		{"byte-level bytes", bpe, "a", "Ã©", "é"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := ids(t, tc.tok, tc.prev, tc.token)
			if got := string(tc.tok.Piece(p[0], p[1])); got != tc.want {
				t.Errorf("Piece = %q, want %q", got, tc.want)
			}
		})
	}
	if got := spm.Piece(0, uint32(spm.VocabSize())); got != nil {
		t.Errorf("Piece of an id out of range = %q", got)
	}
}

func TestVocabAccessors(t *testing.T) {
	t.Parallel()
	spm := mustVocab(t, spmFixture(t))
	if spm.BOS() != 1 || spm.EOS() != 2 || !spm.AddBOS() || spm.AddEOS() {
		t.Errorf("BOS %d EOS %d AddBOS %v AddEOS %v", spm.BOS(), spm.EOS(), spm.AddBOS(), spm.AddEOS())
	}
	if !spm.IsControl(1) || spm.IsControl(3) || spm.Token(1) != "<s>" || spm.Token(1<<30) != "" {
		t.Error("IsControl/Token")
	}
	v := byteLevelFixture(t, "gpt-2")
	v.BOS, v.EOS, v.AddBOS = NoToken, NoToken, true
	none := mustVocab(t, v)
	if none.AddBOS() || !slices.Equal(none.Encode("a", true, true), ids(t, none, "a")) {
		t.Error("a vocabulary without BOS/EOS added them")
	}
	var _ Tokenizer = none
}

func TestNewVocabErrors(t *testing.T) {
	t.Parallel()
	good := func() Vocab { return byteLevelFixture(t, "gpt-2") }
	tests := []struct {
		name   string
		edit   func(*Vocab)
		target error
	}{
		{"unknown model", func(v *Vocab) { v.Model = "bert" }, ErrUnsupported},
		{"unknown pre-tokenizer", func(v *Vocab) { v.Pre = "tekken" }, ErrUnsupported},
		{"no tokens", func(v *Vocab) { v.Tokens, v.Types, v.BOS, v.EOS = nil, nil, NoToken, NoToken }, ErrFormat},
		{"short scores", func(v *Vocab) { v.Scores = []float32{1} }, ErrFormat},
		{"short types", func(v *Vocab) { v.Types = v.Types[:3] }, ErrFormat},
		{"BOS out of range", func(v *Vocab) { v.BOS = uint32(len(v.Tokens)) }, ErrFormat},
		{"strip out of range", func(v *Vocab) { v.RStrip = []uint32{1 << 30} }, ErrFormat},
		{"empty merge side", func(v *Vocab) { v.Merges = append(v.Merges, [2]string{"", "a"}) }, ErrFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := good()
			tc.edit(&v)
			if _, err := NewVocab(v); !errors.Is(err, tc.target) {
				t.Errorf("NewVocab: %v, want %v", err, tc.target)
			}
		})
	}
}

// TestConcurrentEncode shares one tokenizer (and its pooled scratch and
// word cache) between goroutines; run with -race.
func TestConcurrentEncode(t *testing.T) {
	t.Parallel()
	for _, v := range []Vocab{spmFixture(t), byteLevelFixture(t, "qwen2")} {
		tok := mustVocab(t, v)
		texts := make([]string, 64)
		want := make([][]uint32, len(texts))
		r := rand.New(rand.NewPCG(5, 6))
		for i := range texts {
			texts[i] = randomText(r)
			want[i] = tok.EncodeSpecial(texts[i], true, false)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for k := range 200 {
					i := (g*7 + k) % len(texts)
					if got := tok.EncodeSpecial(texts[i], true, false); !slices.Equal(got, want[i]) {
						t.Errorf("%q: %v, alone %v", texts[i], got, want[i])
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// randomText draws texts from an alphabet that exercises merges, spaces,
// newlines, digits, multi-byte code points and invalid bytes.
func randomText(r *rand.Rand) string {
	parts := []string{"a", "b", "h", "e", "l", "o", "w", "r", "d", " ", "  ", "\n", "1", "2", "3", "'s", "é", "ü", "▁", "<", ">", "s", "日", "\xff", "!"}
	var b strings.Builder
	for range r.IntN(40) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// TestMergeMatchesNaive holds the heap, the independent parts and the
// word cache to llama.cpp's plain loop.
func TestMergeMatchesNaive(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	spm := mustVocab(t, spmFixture(t))
	raw := spmFixture(t)
	raw.Model = ModelBPERaw
	for _, m := range []string{"▁ h", "h e", "▁h e", "l l", "▁he ll", "▁hell o", "a a", "▁ a", "b a", "▁ ▁"} {
		l, rr, _ := strings.Cut(m, " ")
		raw.Merges = append(raw.Merges, [2]string{l, rr})
	}
	rawTok := mustVocab(t, raw)
	for _, pre := range []string{"gpt-2", "llama-bpe", "qwen2", "qwen35", "default", "falcon", "starcoder", "deepseek-llm", "deepseek-coder"} {
		v := byteLevelFixture(t, pre)
		tok := mustVocab(t, v)
		for range 300 {
			text := randomText(r)
			if got, want := tok.Encode(text, false, false), naiveBPE(tok, v, text); !slices.Equal(got, want) {
				t.Fatalf("%s %q: %v, naive %v", pre, text, got, want)
			}
		}
	}
	for range 500 {
		text := randomText(r)
		if strings.Contains(text, "<tool>") {
			continue
		}
		if got, want := spm.Encode(text, false, false), naiveSPM(spm, text); !slices.Equal(got, want) {
			t.Fatalf("spm %q: %v, naive %v", text, got, want)
		}
		if got, want := rawTok.Encode(text, false, false), naiveBPE(rawTok, raw, text); !slices.Equal(got, want) {
			t.Fatalf("raw %q: %v, naive %v", text, got, want)
		}
	}
}

// TestMaxPieceBytes checks the bound on random texts: n bytes never
// encode to fewer than n/MaxPieceBytes tokens.
func TestMaxPieceBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, v := range []Vocab{spmFixture(t), byteLevelFixture(t, "gpt-2")} {
		tok := mustVocab(t, v)
		m := tok.MaxPieceBytes()
		if m == 0 {
			t.Fatalf("%s: no bound", v.Model)
		}
		for range 300 {
			text := randomText(r) + "<|im_end|><tool>"
			if n := len(tok.EncodeSpecial(text, false, false)); n*m < len(text) {
				t.Fatalf("%s %q: %d tokens, bound %d", v.Model, text, n, m)
			}
		}
	}
	v := byteLevelFixture(t, "gpt-2")
	v.NFC = true
	if m := mustVocab(t, v).MaxPieceBytes(); m != 0 {
		t.Errorf("NFC vocabulary bound %d, want 0 (normalizing may shrink text)", m)
	}
	v = spmFixture(t)
	v.Tokens[3+0x41] = "<0x4l>" // byte 0x41 loses its fallback; UNK remains
	v.UNK = NoToken
	if m := mustVocab(t, v).MaxPieceBytes(); m != 0 {
		t.Errorf("vocabulary that drops bytes bound %d, want 0", m)
	}
}

// FuzzVocabRoundTrip: no input panics either encoding, a byte-level BPE
// vocabulary gives valid UTF-8 back exactly, and the heap agrees with
// the naive loop.
func FuzzVocabRoundTrip(f *testing.F) {
	for _, s := range []string{"", "hello world", " \n\n  1234 it's", "<|im_start|>x<|im_end|>", "é日🙂\xff", "▁a▁▁b", "<tool> <tool>"} {
		f.Add(s)
	}
	bpeV := byteLevelFixture(f, "llama-bpe")
	bpe := mustVocab(f, bpeV)
	spm := mustVocab(f, spmFixture(f))
	f.Fuzz(func(t *testing.T, text string) {
		got := bpe.Encode(text, false, false)
		if utf8.ValidString(text) {
			if dec := string(Decode(bpe, bpe.BOS(), got)); dec != text {
				t.Fatalf("%q decodes to %q", text, dec)
			}
		}
		if !strings.Contains(text, "<tool>") && len(text) < 200 {
			if want := naiveBPE(bpe, bpeV, text); !slices.Equal(got, want) {
				t.Fatalf("%q: %v, naive %v", text, got, want)
			}
			if got, want := spm.Encode(text, false, false), naiveSPM(spm, text); !slices.Equal(got, want) {
				t.Fatalf("spm %q: %v, naive %v", text, got, want)
			}
		}
		bpe.EncodeSpecial(text, true, true)
		Decode(spm, spm.BOS(), spm.EncodeSpecial(text, true, true))
	})
}
