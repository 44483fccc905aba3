// Package tokenizer turns text into token ids and back, for the engine's
// models and for the frontend, which tokenizes every prompt so the router
// can hash its token ids: a tokenizer that disagreed with the serving
// engine by one token would move every later block hash and miss the
// cache for no visible reason. It lives apart from the engine so the
// frontend can tokenize without linking the executors.
//
// Three tokenizers implement Tokenizer:
//
//   - BPE, the llama2.c tokenizer.bin format (BPE with scores, byte
//     fallback), encoding and decoding exactly as llama2.c run.c does;
//   - Bytes, a byte-level tokenizer for the tiny random test models (both
//     put the byte fallbacks at ids 3..258, BOS at 1 and EOS at 2);
//   - VocabTokenizer, a real model's vocabulary, built with NewVocab from a
//     Vocab that gguf.Vocab reads from a GGUF file or ParseHFJSON from a
//     Hugging Face tokenizer.json. It tokenizes token for token as
//     llama.cpp does with the same vocabulary.
//
// # Vocabularies
//
// Vocab.Model names the algorithm, as GGUF's tokenizer.ggml.model does:
// "llama" is SentencePiece (merges by token score over code points,
// spaces as U+2581, a dummy space prefix, <0xXX> byte fallback); "gpt2"
// is byte-level BPE (GPT-2's byte to code point map, merges by rank,
// words cut by the pre-tokenizer Vocab.Pre names); "gemma4" is BPE by
// rank over raw UTF-8 with U+2581 spaces and byte fallback, which is also
// the form of Hugging Face's tokenizer.json for SentencePiece models.
// The pre-tokenizers are those of tokenizer.ggml.pre: "default",
// "gpt-2" and its aliases ("mpt", "olmo", "phi-2", ...), "llama-bpe"
// (llama 3; "llama3", "dbrx", "smaug-bpe", ...), "qwen2" ("stablelm2",
// "deepseek-r1-qwen", ...), "qwen35", "starcoder" ("refact",
// "command-r", "smollm", ...), "falcon", "deepseek-llm",
// "deepseek-coder". Others (tekken, gpt-4o, kimi-k2, ...), WordPiece,
// Unigram and RWKV vocabularies are refused with ErrUnsupported.
//
// The pre-tokenizers' regular expressions use lookahead (\s+(?!\S)),
// which Go's regexp lacks. They are written by hand (pretok.go), as
// llama.cpp writes its common ones in unicode.cpp, rather than run by a
// backtracking regex engine: no dependency, linear time, and llama.cpp's
// own reading of the expressions (its \p{..} classes come from one
// general category per code point, from Go's unicode tables here). Code
// points assigned after Go's Unicode version may classify differently.
//
// # Special tokens
//
// Control tokens ("<|im_start|>", "<s>") are matched in the text only by
// EncodeSpecial (llama.cpp's parse_special=true), for text a chat
// template made; Encode (parse_special=false) leaves them text, so a user
// cannot forge them, but still matches user-defined tokens, as llama.cpp
// does. Matching follows llama.cpp's order: longest token first, each
// taking its leftmost occurrences.
//
// # Decoding
//
// Piece maps ids back to bytes: byte-level tokens through GPT-2's map,
// SentencePiece U+2581 to a space (dropped after BOS, the dummy prefix),
// byte tokens to their byte, user-defined tokens to their text, control
// tokens to nothing. decode(encode(s)) is s for valid UTF-8 with
// byte-level BPE. Invalid UTF-8 is tokenized as llama.cpp does for BPE
// (each bad byte as U+FFFD) and kept as bytes by SentencePiece.
//
// # Speed
//
// Merging uses a heap (O(n log n), not llama.cpp's rescans), splits
// SentencePiece text at the word starts no token spans, and remembers the
// ids of the words a pooled scratch has seen. BenchmarkEncode in package
// gguf measures 4 KiB of English on one core: about 80 MB/s with
// llama-spm and 50-60 MB/s with llama-bpe, qwen2 and gpt-2 once the word
// cache is warm; 7-9 MB/s for words seen for the first time (45 MB/s for
// llama-bpe, whose words are mostly tokens).
//
// # Conformance
//
// gguf's TestLlamaCppVectors tokenizes llama.cpp's own test vectors
// (models/ggml-vocab-*.gguf with .inp/.out) and compares every id:
// llama-spm, llama-bpe, gpt-2, qwen2, qwen35, phi-3, mpt, starcoder,
// refact, command-r, falcon, deepseek-llm, deepseek-coder and gemma-4
// match; bert-bge (WordPiece) is not implemented. TestHFJSONFromGGUFVectors
// writes those vocabularies as tokenizer.json and gets the same ids.
// Reproduce with:
//
//	LLAMACPP_TESTDATA=$HOME/.cache/switchyard/llamacpp-testdata-3.21.1 \
//	SWITCHYARD_REQUIRE_SHARED=1 go test ./libs/engine/gguf/ -run 'Vectors'
package tokenizer

import "errors"

// Well-known ids shared by the llama2.c tokenizers and the byte tokenizer.
const (
	UNK uint32 = 0
	BOS uint32 = 1
	EOS uint32 = 2
	// ByteOffset is the id of byte 0x00 among the byte fallback tokens.
	ByteOffset uint32 = 3
)

// ErrFormat is wrapped by every error about a malformed tokenizer file.
var ErrFormat = errors.New("tokenizer: malformed file")

// Tokenizer encodes text to ids and decodes ids to bytes. Implementations
// are immutable after construction and safe for concurrent use.
type Tokenizer interface {
	// Encode tokenizes text, optionally prepending BOS and appending EOS.
	Encode(text string, bos, eos bool) []uint32
	// Piece returns the bytes token decodes to when it follows prev, as
	// llama2.c run.c decode does (the leading space is stripped after BOS).
	// Control tokens decode to nothing.
	Piece(prev, token uint32) []byte
	// VocabSize is the number of token ids; valid ids are below it.
	VocabSize() int
	// BOS and EOS return the begin/end of sequence ids (NoToken for a
	// vocabulary that has none).
	BOS() uint32
	EOS() uint32
	// MaxPieceBytes bounds the bytes of text one token stands for, so n
	// bytes encode to at least n/MaxPieceBytes tokens; 0 when there is no
	// such bound.
	MaxPieceBytes() int
}

// Decode concatenates the pieces of tokens, each decoded after its
// predecessor (prev is the token before tokens[0], or BOS at the start).
func Decode(t Tokenizer, prev uint32, tokens []uint32) []byte {
	var out []byte
	for _, id := range tokens {
		out = append(out, t.Piece(prev, id)...)
		prev = id
	}
	return out
}
