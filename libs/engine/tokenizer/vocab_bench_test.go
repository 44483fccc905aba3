package tokenizer

import (
	"strings"
	"testing"
)

// BenchmarkVocabEncode runs the vocabulary tokenizers on the test
// fixtures, so the code is measured without llama.cpp's vocabularies
// (BenchmarkEncode in package gguf uses those).
func BenchmarkVocabEncode(b *testing.B) {
	text := strings.Repeat("hello world, he said; all is well 12345 ", 103)[:4096]
	for _, tc := range []struct {
		name string
		v    Vocab
	}{{"spm", spmFixture(b)}, {"bpe", byteLevelFixture(b, "gpt-2")}} {
		b.Run(tc.name, func(b *testing.B) {
			tok := mustVocab(b, tc.v)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.Encode(text, false, false)
			}
		})
	}
}
