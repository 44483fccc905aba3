// Package tokenizer turns text into token ids and back for the engine's
// models. It lives apart from the engine so the HTTP frontend can tokenize
// without linking the executors.
//
// Two tokenizers are provided: the llama2.c tokenizer.bin format (BPE with
// scores, byte fallback), encoding and decoding exactly as llama2.c run.c
// does, and a byte-level tokenizer for the tiny random test models. Both put
// the byte fallbacks at ids 3..258 (byte b is id b+3), BOS at 1 and EOS at 2.
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
	// BOS and EOS return the begin/end of sequence ids.
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
