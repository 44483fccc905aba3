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
	widest   int // the longest piece, in bytes
	longest  int // widest, or 0 when it bounds nothing (MaxPieceBytes)
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

// BPEEntries counts the entries of a llama2.c tokenizer.bin, for a
// reader that does not know its vocabulary size (a worker given only the
// file): ParseBPE needs the count.
func BPEEntries(data []byte) (int, error) {
	if len(data) < 4 {
		return 0, fmt.Errorf("%w: %d bytes, need at least 4 for the header", ErrFormat, len(data))
	}
	n := 0
	for off := 4; off < len(data); n++ {
		if len(data)-off < 8 {
			return 0, fmt.Errorf("%w: truncated at entry %d (offset %d)", ErrFormat, n, off)
		}
		l := int(int32(binary.LittleEndian.Uint32(data[off+4:])))
		if l < 0 || l > len(data)-off-8 {
			return 0, fmt.Errorf("%w: entry %d has length %d", ErrFormat, n, l)
		}
		off += 8 + l
	}
	return n, nil
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
	}
	// The header's max_token_length is not used: run.c sizes a buffer by
	// it, but it comes from the file (a tokenizer a worker serves), so a
	// wrong one must not size anything. The pieces' own lengths do.
	off := 4
	for i := range vocabSize {
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
		t.widest = max(t.widest, n)
		if _, dup := t.index[s]; !dup {
			t.index[s] = uint32(i) // first wins, like bsearch over a stable sort
		}
	}
	if off != len(data) {
		// The file holds more entries than the model's vocabulary: the
		// tokenizer of another model (llama2.c's 32000-entry one beside a
		// 512-token model), whose first pieces would decode to wrong text.
		return nil, fmt.Errorf("%w: %d bytes left after the %d entries of the vocabulary (a tokenizer for a larger one?)", ErrFormat, len(data)-off, vocabSize)
	}
	for b := range 256 {
		t.bytePick[b] = []byte{byte(b)}
	}
	t.longest = t.widest
	// MaxPieceBytes bounds the text a token stands for only when every
	// byte fallback has a piece of its own: an empty one (or a missing
	// one, in a vocabulary under 259 entries) would merge with its
	// neighbours and stand for bytes its piece does not show.
	for id := ByteOffset; id < ByteOffset+256; id++ {
		if int(id) >= len(t.vocab) || t.vocab[id] == "" {
			t.longest = 0
			break
		}
	}
	return t, nil
}

// VocabSize implements Tokenizer.
func (t *BPE) VocabSize() int { return len(t.vocab) }

// MaxPieceBytes is the length of the longest piece, or 0 when it bounds
// nothing (a byte fallback with no piece of its own). Every token of an
// encoded text stands for at most that many of its bytes: a merged token's
// piece is its two parts' pieces joined, a byte fallback "<0xXX>" stands
// for one byte, and BOS and the leading space stand for none (they may
// merge with the text, which only makes the merged token's piece longer).
// So n bytes of text encode to at least n/MaxPieceBytes tokens, BOS
// included, and a caller can refuse a text too long for a context without
// encoding it.
func (t *BPE) MaxPieceBytes() int { return t.longest }

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

// Score returns token id's merge score (0 for an id out of range): the
// priority of the merge that makes it, higher first.
func (t *BPE) Score(id uint32) float32 {
	if int(id) >= len(t.scores) {
		return 0
	}
	return t.scores[id]
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
			for k := range len(unit) {
				tokens = append(tokens, uint32(unit[k])+ByteOffset)
			}
		}
		i = j
	}
	return tokens
}

// merge applies run.c's merges: while some adjacent pair's concatenation is
// in the vocabulary with a score above -1e10, merge the pair with the
// highest score, the leftmost of equals. run.c rescans every pair after
// each merge, O(n²) in the text's length (a 1 MB prompt was hours of CPU).
// Here each pair is scored once, when it forms, into a heap ordered by
// (score, leftmost), and a popped pair counts only if both of its symbols
// are still there, side by side, with the ids it was scored for: the same
// merges in the same order, in O(n log n). TestMergeMatchesRunC and
// FuzzMerge hold it to run.c's loop.
func (t *BPE) merge(tokens []uint32) []uint32 {
	n := len(tokens)
	if n < 2 {
		return tokens
	}
	next := make([]int32, n) // -1 past the end; -2 merged away
	prev := make([]int32, n)
	for i := range n {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	next[n-1] = -1
	buf := make([]byte, 0, 2*max(t.widest, 1)+2)
	var h pairHeap
	score := func(l, r int32) {
		buf = append(append(buf[:0], t.Vocab(tokens[l])...), t.Vocab(tokens[r])...)
		if id, ok := t.index[string(buf)]; ok && t.scores[id] > -1e10 { // run.c's floor; NaN never wins
			h.push(pair{score: t.scores[id], left: l, right: r, leftID: tokens[l], rightID: tokens[r], id: id})
		}
	}
	for i := range int32(n - 1) {
		score(i, i+1)
	}
	for len(h) > 0 {
		p := h.pop()
		if next[p.left] != p.right || tokens[p.left] != p.leftID || tokens[p.right] != p.rightID {
			continue // stale: a neighbour merged since it was scored
		}
		tokens[p.left] = p.id
		after := next[p.right]
		next[p.right] = -2
		next[p.left] = after
		if after >= 0 {
			prev[after] = p.left
			score(p.left, after)
		}
		if before := prev[p.left]; before >= 0 {
			score(before, p.left)
		}
	}
	out := tokens[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, tokens[i]) // len(out) <= i: reads stay ahead of writes
	}
	return out
}

// pair is a mergeable adjacent pair, scored when it formed.
type pair struct {
	score           float32
	left, right     int32 // symbol positions (in the text's order)
	leftID, rightID uint32
	id              uint32 // the merged token
}

// pairHeap is a max-heap by score, then leftmost: run.c's choice.
type pairHeap []pair

func (h pairHeap) less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].left < h[j].left
}

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	h.up(len(*h) - 1)
}

func (h *pairHeap) pop() pair {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h pairHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (h pairHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		best := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			best = r
		}
		if !h.less(best, i) {
			return
		}
		h[i], h[best] = h[best], h[i]
		i = best
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
