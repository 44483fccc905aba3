package gguf

import (
	"strings"
	"testing"

	"switchyard.dev/libs/engine/tokenizer"
)

// benchProse is plain English, repeated to 4 KiB: a typical prompt.
const benchProse = `The frontend tokenizes every prompt before it routes it, so that the router can hash the token ids of each block and send the request to the worker that already holds the longest prefix in its cache. A tokenizer that disagreed with the engine by a single token would make every later block hash differently, and the cache would miss for no visible reason. That is why the vocabulary is read from the same file the engine loads, and why the tests compare ids, not text. Numbers like 1234567 and 3.14159, words in other scripts, and code such as fmt.Println("hello, world") all appear in real prompts. `

func benchText() string {
	var b strings.Builder
	for b.Len() < 4096 {
		b.WriteString(benchProse)
	}
	return b.String()[:4096]
}

// BenchmarkEncode measures encode throughput (MB/s of text) on 4 KiB of
// English with real vocabularies: SentencePiece (llama-spm) and byte-level
// BPE (llama-bpe, qwen2, gpt-2).
func BenchmarkEncode(b *testing.B) {
	text := benchText()
	for _, name := range []string{"llama-spm", "llama-bpe", "qwen2", "gpt-2"} {
		b.Run(name, func(b *testing.B) {
			tok, err := tokenizer.NewVocab(loadVocab(b, vocabPath(b, name)))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				tok.Encode(text, false, false)
			}
		})
	}
}

// BenchmarkEncodeSpecial is a chat-templated prompt with control tokens.
func BenchmarkEncodeSpecial(b *testing.B) {
	text := "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n" + benchText() + "<|im_end|>\n<|im_start|>assistant\n"
	tok, err := tokenizer.NewVocab(loadVocab(b, vocabPath(b, "qwen2")))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tok.EncodeSpecial(text, false, false)
	}
}
