package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"unicode/utf8"
)

// maxPieceLen bounds a vocabulary entry so a corrupt length cannot make the
// loader allocate gigabytes.
const maxPieceLen = 1 << 16

// BPE is the llama2.c tokenizer: a vocabulary of byte strings with merge
// scores.
type BPE struct {
	vocab    []string
	scores   []float32
	index    map[string]uint32
	maxLen   int
	bytePick [256][]byte
}

// LoadBPEFile reads a llama2.c tokenizer.bin with vocabSize entries.
func LoadBPEFile(path string, vocabSize int) (*BPE, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := ParseBPE(data, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseBPE decodes the llama2.c tokenizer.bin layout: int32
// max_token_length, then vocabSize records of (float32 score, int32 len,
// len bytes), all little-endian.
func ParseBPE(data []byte, vocabSize int) (*BPE, error) {
	if vocabSize <= 0 || vocabSize > 1<<24 {
		return nil, fmt.Errorf("%w: vocab size %d out of range", ErrFormat, vocabSize)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, need at least 4 for the header", ErrFormat, len(data))
	}
	t := &BPE{
		vocab:  make([]string, 0, min(vocabSize, len(data)/8+1)),
		scores: make([]float32, 0, min(vocabSize, len(data)/8+1)),
		index:  make(map[string]uint32, min(vocabSize, len(data)/8+1)),
		maxLen: int(int32(binary.LittleEndian.Uint32(data))),
	}
	off := 4
	for i := 0; i < vocabSize; i++ {
		if len(data)-off < 8 {
			return nil, fmt.Errorf("%w: truncated at entry %d (offset %d)", ErrFormat, i, off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int(int32(binary.LittleEndian.Uint32(data[off+4:])))
		off += 8
		if n < 0 || n > maxPieceLen || n > len(data)-off {
			return nil, fmt.Errorf("%w: entry %d has length %d with %d bytes left", ErrFormat, i, n, len(data)-off)
		}
		s := string(data[off : off+n])
		off += n
		t.vocab = append(t.vocab, s)
		t.scores = append(t.scores, score)
		if _, dup := t.index[s]; !dup {
			t.index[s] = uint32(i) // first wins, like bsearch over a stable sort
		}
	}
	for b := range 256 {
		t.bytePick[b] = []byte{byte(b)}
	}
	return t, nil
}

// VocabSize implements Tokenizer.
func (t *BPE) VocabSize() int { return len(t.vocab) }

// BOS implements Tokenizer.
func (t *BPE) BOS() uint32 { return BOS }

// EOS implements Tokenizer.
func (t *BPE) EOS() uint32 { return EOS }

// Vocab returns the string of token id.
func (t *BPE) Vocab(id uint32) string {
	if int(id) >= len(t.vocab) {
		return ""
	}
	return t.vocab[id]
}

// Piece implements Tokenizer exactly as run.c decode: the leading space of a
// piece is dropped after BOS, and "<0xXX>" pieces are raw bytes.
func (t *BPE) Piece(prev, token uint32) []byte {
	if int(token) >= len(t.vocab) {
		return nil
	}
	p := t.vocab[token]
	if prev == BOS && len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	if b, ok := rawByte(p); ok {
		return t.bytePick[b]
	}
	return []byte(p)
}

// rawByte parses the "<0xXX>" form (run.c sscanf "<0x%02hhX>").
func rawByte(p string) (byte, bool) {
	if len(p) != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(p[3])
	lo, ok2 := hexVal(p[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Encode implements Tokenizer exactly as run.c encode: optional BOS, a dummy
// " " prefix when text is non-empty, one token per UTF-8 code point (or its
// bytes+3 when the code point is not in the vocabulary), then repeated
// merging of the adjacent pair whose concatenation has the best score.
func (t *BPE) Encode(text string, bos, eos bool) []uint32 {
	tokens := make([]uint32, 0, len(text)+3)
	if bos {
		tokens = append(tokens, BOS)
	}
	if text != "" {
		if id, ok := t.index[" "]; ok {
			tokens = append(tokens, id)
		} else {
			tokens = append(tokens, ' '+ByteOffset)
		}
	}
	tokens = t.appendCodePoints(tokens, text)
	tokens = t.merge(tokens)
	if eos {
		tokens = append(tokens, EOS)
	}
	return tokens
}

// appendCodePoints groups bytes the way run.c does: a leading byte plus at
// most three continuation bytes form one lookup unit.
func (t *BPE) appendCodePoints(tokens []uint32, text string) []uint32 {
	for i := 0; i < len(text); {
		j := i + 1
		for j < len(text) && text[j]&0xC0 == 0x80 && j-i < 4 {
			j++
		}
		unit := text[i:j]
		if id, ok := t.index[unit]; ok {
			tokens = append(tokens, id)
		} else {
			for k := 0; k < len(unit); k++ {
				tokens = append(tokens, uint32(unit[k])+ByteOffset)
			}
		}
		i = j
	}
	return tokens
}

func (t *BPE) merge(tokens []uint32) []uint32 {
	buf := make([]byte, 0, 2*max(t.maxLen, 1)+2)
	for {
		best, bestID, bestIdx := float32(-1e10), uint32(0), -1
		for i := 0; i+1 < len(tokens); i++ {
			buf = append(append(buf[:0], t.Vocab(tokens[i])...), t.Vocab(tokens[i+1])...)
			id, ok := t.index[string(buf)]
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

// ValidUTF8Prefix returns how many leading bytes of b can be emitted as
// text: all of b unless it ends inside a multi-byte UTF-8 code point, whose
// (at most three) bytes streaming callers hold back for the next piece.
func ValidUTF8Prefix(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		c := b[i]
		if c&0xC0 == 0x80 {
			continue
		}
		if c >= 0xC0 && !utf8.FullRune(b[i:]) {
			return i
		}
		return len(b)
	}
	return len(b)
}
