package gguf

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/sharedtest"
)

// llamaVocabs are llama.cpp's ggml-vocab-*.gguf files that ship tokenizer
// test vectors (.inp/.out), with why a vocabulary is not run.
var llamaVocabs = []struct {
	name, skip string
}{
	{name: "llama-spm"},
	{name: "llama-bpe"},
	{name: "gpt-2"},
	{name: "qwen2"},
	{name: "qwen35"},
	{name: "phi-3"},
	{name: "mpt"},
	{name: "starcoder"},
	{name: "refact"},
	{name: "command-r"},
	{name: "falcon"},
	{name: "deepseek-llm"},
	{name: "deepseek-coder"},
	{name: "gemma-4"},
	{name: "bert-bge", skip: "WordPiece (tokenizer.ggml.model \"bert\") is not implemented"},
}

// vectorCase is one case of a .inp/.out pair.
type vectorCase struct {
	text string
	want []uint32
}

// readVectors parses llama.cpp's test-tokenizer-0 format: inputs separated
// by "\n__ggml_vocab_test__\n", one line of space-separated ids each.
func readVectors(t *testing.T, gguf string) []vectorCase {
	t.Helper()
	inp, err := os.ReadFile(gguf + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(gguf + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	for s := string(inp); s != ""; {
		i := strings.Index(s, sep)
		if i < 0 {
			texts = append(texts, s)
			break
		}
		texts = append(texts, s[:i])
		s = s[i+len(sep):]
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%d inputs, %d outputs", len(texts), len(lines))
	}
	cases := make([]vectorCase, len(texts))
	for i, line := range lines {
		cases[i].text = texts[i]
		for _, f := range strings.Fields(line) {
			id, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				t.Fatalf("output line %d: %v", i, err)
			}
			cases[i].want = append(cases[i].want, uint32(id))
		}
	}
	return cases
}

func loadVocab(t testing.TB, path string) tokenizer.Vocab {
	t.Helper()
	md, err := ReadMetadataFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Vocab(md)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func vocabPath(t testing.TB, name string) string {
	t.Helper()
	return sharedtest.LlamaCpp(t, "models/ggml-vocab-"+name+".gguf")
}

// TestLlamaCppVectors tokenizes every case of llama.cpp's vectors as its
// test-tokenizer-0 does (add_special=false, parse_special=false) and
// checks the ids token for token, then that decoding gives the text back.
func TestLlamaCppVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range llamaVocabs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			path := vocabPath(t, tc.name)
			tok, err := tokenizer.NewVocab(loadVocab(t, path))
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, tok, readVectors(t, path))
		})
	}
}

func checkVectors(t *testing.T, tok *tokenizer.VocabTokenizer, cases []vectorCase) {
	t.Helper()
	for i, c := range cases {
		got := tok.Encode(c.text, false, false)
		if !slices.Equal(got, c.want) {
			t.Errorf("case %d %q:\n got %v %s\nwant %v %s", i, c.text, got, pieces(tok, got), c.want, pieces(tok, c.want))
			continue
		}
		if dec := tokenizer.Decode(tok, tok.BOS(), got); !roundTrips(c.text, dec) {
			t.Errorf("case %d %q decodes to %q", i, c.text, dec)
		}
	}
}

// roundTrips reports whether decoded is text, allowing what a tokenizer
// cannot give back: invalid UTF-8 (replaced before tokenizing) and
// U+2581 in SentencePiece text (which is its space).
func roundTrips(text string, decoded []byte) bool {
	if !utf8.ValidString(text) {
		return true
	}
	return string(decoded) == text || string(decoded) == strings.ReplaceAll(text, "\u2581", " ")
}

func pieces(tok *tokenizer.VocabTokenizer, ids []uint32) string {
	var b bytes.Buffer
	for _, id := range ids {
		fmt.Fprintf(&b, "%q ", tok.Token(id))
	}
	return b.String()
}

// TestVocabOfConvertedStories reads back the GGUF vocabulary written for
// stories260K and checks that it tokenizes as llama2.c's own tokenizer.
func TestVocabOfConvertedStories(t *testing.T) {
	t.Parallel()
	ckpt, bpe := loadStories(t)
	var buf bytes.Buffer
	if err := ConvertLlama2c(&buf, ckpt, bpe, "stories260K"); err != nil {
		t.Fatal(err)
	}
	md, err := ReadMetadata(&buf)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Vocab(md)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.NewVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Once upon a time", "  two  spaces", "naïve 日本 🙂\n", "Lily said, \"Let's play!\"", storiesRef} {
		if got, want := tok.Encode(text, true, false), bpe.Encode(text, true, false); !slices.Equal(got, want) {
			t.Errorf("%q: %v, llama2.c %v", text, got, want)
		}
	}
}
