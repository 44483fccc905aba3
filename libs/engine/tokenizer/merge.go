package tokenizer

import (
	"math"
	"unicode/utf8"
)

// Both vocabulary tokenizers merge adjacent symbols, highest priority
// first, the leftmost of equals, until no pair merges: SentencePiece by
// the score of the token the pair spells (llama.cpp's llm_tokenizer_spm),
// BPE by the rank of the merge of the two (llm_tokenizer_bpe). Each pair
// is scored once, when it forms, into a heap; a popped pair counts only
// if both symbols are still there as they were, which is the order and
// outcome of rescanning every pair after each merge, in O(n log n).

// symbol is a span of the text being merged.
type symbol struct {
	start, end int32 // bytes; end is -1 once merged into the left neighbour
	prev, next int32 // neighbours, -1 at the ends
	id         uint32
}

// cand is a pair of adjacent symbols that may merge.
type cand struct {
	// key orders candidates, smallest first: the priority in the high
	// half (rank, or the score mapped to an unsigned order and inverted),
	// the left symbol's index in the low half, so ties go leftmost.
	key        uint64
	right      int32
	lend, rend int32 // the symbols' ends when scored
	id         uint32
}

func (c *cand) left() int32 { return int32(uint32(c.key)) }

// scoreKey maps a score to a priority: higher scores to smaller keys,
// -0 as +0, so that equal scores tie as they compare in llama.cpp.
func scoreKey(f float32) uint32 {
	if f == 0 {
		f = 0
	}
	b := math.Float32bits(f)
	if b>>31 != 0 {
		b = ^b
	} else {
		b |= 1 << 31
	}
	return ^b
}

// candHeap is a binary min-heap by key.
type candHeap []cand

// init orders h in place in O(n).
func (h candHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].key <= c.key {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = c
}

func (h *candHeap) pop() cand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	if last > 0 {
		s.down(0)
	}
	*h = s
	return top
}

func (h candHeap) down(i int) {
	c := h[i]
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		if r := l + 1; r < len(h) && h[r].key < h[l].key {
			l = r
		}
		if c.key <= h[l].key {
			break
		}
		h[i] = h[l]
		i = l
	}
	h[i] = c
}

// cutSymbols cuts text into one symbol per UTF-8 sequence, judged by the
// lead byte alone, each with the id index gives its text (NoToken when
// none or, with lookup unset, not yet looked up).
func (t *VocabTokenizer) cutSymbols(s *scratch, text []byte, lookup bool) []symbol {
	syms := s.syms[:0]
	for i := 0; i < len(text); {
		l := min(utf8Len(text[i]), len(text)-i)
		id := NoToken
		if lookup {
			if v, ok := t.index[string(text[i:i+l])]; ok {
				id = v
			}
		}
		n := int32(len(syms))
		syms = append(syms, symbol{start: int32(i), end: int32(i + l), prev: n - 1, next: n + 1, id: id})
		i += l
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	s.syms = syms
	return syms
}

// merge runs the merge loop over syms; pair returns the priority of
// merging two adjacent symbols (smaller first) and the id of the merge.
func merge(s *scratch, syms []symbol, pair func(l, r *symbol) (uint32, uint32, bool)) {
	h := s.heap[:0]
	score := func(l, r int32) (cand, bool) {
		prio, id, ok := pair(&syms[l], &syms[r])
		return cand{key: uint64(prio)<<32 | uint64(uint32(l)), right: r, lend: syms[l].end, rend: syms[r].end, id: id}, ok
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		if c, ok := score(i-1, i); ok {
			h = append(h, c)
		}
	}
	h.init()
	for len(h) > 0 {
		c := h.pop()
		left := c.left()
		l, r := &syms[left], &syms[c.right]
		if l.end != c.lend || r.end != c.rend || l.next != c.right {
			continue // stale: a neighbour merged since it was scored
		}
		l.end, l.id = r.end, c.id
		r.end = -1
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = left
		}
		if l.prev >= 0 {
			if c, ok := score(l.prev, left); ok {
				h.push(c)
			}
		}
		if l.next >= 0 {
			if c, ok := score(left, l.next); ok {
				h.push(c)
			}
		}
	}
	s.heap = h
}

// emit appends the tokens of the merged symbols: each symbol's token, or,
// for text that is no token, the fallback token of each of its bytes.
func (t *VocabTokenizer) emit(out []uint32, syms []symbol, text []byte) []uint32 {
	for i := int32(0); len(syms) > 0 && i >= 0; i = syms[i].next {
		sy := &syms[i]
		id := sy.id
		if id == NoToken {
			if v, ok := t.token(string(text[sy.start:sy.end])); ok {
				id = v
			}
		}
		if id < t.n {
			out = append(out, id)
			continue
		}
		for _, b := range text[sy.start:sy.end] {
			if bt := t.byteTok[b]; bt != NoToken {
				out = append(out, bt)
			}
		}
	}
	return out
}

// encodeSPM tokenizes one fragment as llama.cpp's SentencePiece session:
// an optional leading space, spaces as U+2581, then merges by score of
// the token a pair spells.
func (t *VocabTokenizer) encodeSPM(s *scratch, out []uint32, seg string, prefix bool) []uint32 {
	text := s.word[:0]
	if prefix {
		text = append(text, spaceMark...)
	}
	for i := range len(seg) {
		if seg[i] == ' ' {
			text = append(text, spaceMark...)
		} else {
			text = append(text, seg[i])
		}
	}
	s.word = text
	for len(text) > 0 {
		n := t.independent(text)
		out = s.cached(out, text[:n], t.mergeSPM)
		text = text[n:]
	}
	return out
}

func (t *VocabTokenizer) mergeSPM(s *scratch, out []uint32, text []byte) []uint32 {
	syms := t.cutSymbols(s, text, false)
	merge(s, syms, func(l, r *symbol) (uint32, uint32, bool) {
		id, ok := t.token(string(text[l.start:r.end]))
		if !ok {
			return 0, 0, false
		}
		return scoreKey(t.scores[id]), id, true
	})
	return t.emit(out, syms, text)
}

// cached appends the ids of a text that merges on its own, from the
// scratch's cache or from tokenize. Prompts are made of a few thousand
// distinct words, so most are found.
func (s *scratch) cached(out []uint32, text []byte, tokenize func(*scratch, []uint32, []byte) []uint32) []uint32 {
	if len(text) > maxCachedWord {
		return tokenize(s, out, text)
	}
	if span, ok := s.words[string(text)]; ok {
		return append(out, s.wordIDs[span[0]:span[1]]...)
	}
	n := len(out)
	out = tokenize(s, out, text)
	if s.words == nil || len(s.words) >= maxCachedWords {
		s.words = make(map[string][2]int32, 256)
		s.wordIDs = s.wordIDs[:0]
	}
	at := int32(len(s.wordIDs))
	s.wordIDs = append(s.wordIDs, out[n:]...)
	s.words[string(text)] = [2]int32{at, int32(len(s.wordIDs))}
	return out
}

// independent returns the length of the leading part of text that merges
// on its own: up to the first U+2581 that no mergeable string holds
// joined to the symbol before it. No symbol can grow across such a point,
// and merges on either side never change the pairs on the other, so
// merging the parts apart gives what merging the whole does, with heaps
// a word long instead of a text long.
func (t *VocabTokenizer) independent(text []byte) int {
	prev := -1
	for i := 0; i < len(text); {
		l := min(utf8Len(text[i]), len(text)-i)
		if prev >= 0 && l == len(spaceMark) && string(text[i:i+l]) == spaceMark {
			if _, joins := t.joinsMark[string(text[prev:i])]; !joins {
				return i
			}
		}
		prev = i
		i += l
	}
	return len(text)
}

// initJoinsMark finds the symbols that some mergeable string (a token for
// SentencePiece, a merge's result for BPE) holds right before U+2581.
func (t *VocabTokenizer) initJoinsMark(strs func(yield func(string) bool)) {
	t.joinsMark = map[string]struct{}{}
	for s := range strs {
		if len(s) <= len(spaceMark) {
			continue
		}
		prev := -1
		for i := 0; i < len(s); {
			l := min(utf8Len(s[i]), len(s)-i)
			if prev >= 0 && s[i:i+l] == spaceMark {
				t.joinsMark[s[prev:i]] = struct{}{}
			}
			prev = i
			i += l
		}
	}
}

// encodeBPE tokenizes one fragment as llama.cpp's BPE session: words by
// the pre-tokenizer, each spelled in GPT-2's byte code points (or, raw,
// as UTF-8 with spaces as U+2581), then merges by rank.
func (t *VocabTokenizer) encodeBPE(s *scratch, out []uint32, seg string, prefix bool) []uint32 {
	cps := s.cps[:0]
	if t.kind == kindBPERaw {
		if prefix {
			cps = append(cps, '\u2581')
		}
		for _, r := range seg {
			if r == ' ' {
				r = '\u2581'
			}
			cps = append(cps, r)
		}
	} else {
		if prefix {
			cps = append(cps, ' ')
		}
		cps = decodeRunes(cps, seg)
	}
	tab := classTable()
	cls := s.cls[:0]
	for _, r := range cps {
		cls = append(cls, classOf(tab, r))
	}
	s.cps, s.cls = cps, cls
	s.pieces = t.pre.split(cps, cls, s.pieces, s.pieces2)
	bl := byteLevelMap()
	off := 0
	for _, n := range s.pieces {
		word := s.word[:0]
		for _, r := range cps[off : off+int(n)] {
			if t.kind == kindBPERaw {
				word = utf8.AppendRune(word, r)
				continue
			}
			var b [4]byte
			for _, c := range b[:utf8.EncodeRune(b[:], r)] {
				word = append(word, bl.enc[c]...)
			}
		}
		s.word = word
		out = t.encodeWord(s, out, word)
		off += int(n)
	}
	return out
}

// encodeWord merges one pre-tokenized word.
func (t *VocabTokenizer) encodeWord(s *scratch, out []uint32, word []byte) []uint32 {
	if t.ignoreMerges || (t.kind == kindBPERaw && onlyNewlines(word)) {
		if id, ok := t.token(string(word)); ok {
			return append(out, id)
		}
	}
	if t.kind == kindBPERaw {
		for len(word) > 0 {
			n := t.independent(word)
			out = s.cached(out, word[:n], t.mergeWord)
			word = word[n:]
		}
		return out
	}
	return s.cached(out, word, t.mergeWord)
}

// Bounds on the word cache of one scratch (see cached).
const (
	maxCachedWord  = 64 // bytes, as spelled in byte code points
	maxCachedWords = 1 << 13
)

func (t *VocabTokenizer) mergeWord(s *scratch, out []uint32, word []byte) []uint32 {
	syms := t.cutSymbols(s, word, true)
	merge(s, syms, func(l, r *symbol) (uint32, uint32, bool) {
		if l.id == NoToken || r.id == NoToken {
			return 0, 0, false
		}
		m, ok := t.merges[uint64(l.id)<<32|uint64(r.id)]
		if !ok {
			return 0, 0, false
		}
		return uint32(m.rank), m.id, true
	})
	return t.emit(out, syms, word)
}

func onlyNewlines(b []byte) bool {
	for _, c := range b {
		if c != '\n' {
			return false
		}
	}
	return len(b) > 0
}
