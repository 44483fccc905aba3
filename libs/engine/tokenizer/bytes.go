package tokenizer

import "fmt"

// Bytes is a byte-level tokenizer: byte b is token b+3, with UNK, BOS and EOS
// at 0, 1 and 2 like the llama2.c vocabularies. Ids from 259 up to the
// vocabulary size exist (a random model may emit them) and decode to
// nothing.
type Bytes struct {
	vocab int
}

// NewBytes returns a byte tokenizer for a model with vocabSize ids; it needs
// at least 259.
func NewBytes(vocabSize int) (*Bytes, error) {
	if vocabSize < 259 {
		return nil, fmt.Errorf("tokenizer: byte tokenizer needs vocab >= 259, got %d", vocabSize)
	}
	return &Bytes{vocab: vocabSize}, nil
}

// Encode implements Tokenizer.
func (b *Bytes) Encode(text string, bos, eos bool) []uint32 {
	out := make([]uint32, 0, len(text)+2)
	if bos {
		out = append(out, BOS)
	}
	for i := range len(text) {
		out = append(out, uint32(text[i])+ByteOffset)
	}
	if eos {
		out = append(out, EOS)
	}
	return out
}

// Piece implements Tokenizer.
func (b *Bytes) Piece(_, token uint32) []byte {
	if token < ByteOffset || token >= ByteOffset+256 {
		return nil
	}
	return []byte{byte(token - ByteOffset)}
}

// VocabSize implements Tokenizer.
func (b *Bytes) VocabSize() int { return b.vocab }

// MaxPieceBytes is 1: every token stands for one byte of text (see
// BPE.MaxPieceBytes).
func (b *Bytes) MaxPieceBytes() int { return 1 }

// BOS implements Tokenizer.
func (b *Bytes) BOS() uint32 { return BOS }

// EOS implements Tokenizer.
func (b *Bytes) EOS() uint32 { return EOS }
