package tokenizer

import (
	"unicode"
)

// A byte-level BPE vocabulary is trained on words: a pre-tokenizer cuts
// the text into them first, and merges never cross a word's edge. Each
// vocabulary names its pre-tokenizer (GGUF's tokenizer.ggml.pre), which is
// one or more regular expressions applied in turn, every one splitting
// the pieces the previous left into matches and the gaps between them.
//
// The expressions use lookahead (\s+(?!\S)), which Go's regexp lacks. So
// each is written here by hand, as llama.cpp does in unicode.cpp for the
// common ones, following llama.cpp's semantics where they differ from the
// expression's letter: its \p{..} classes on non-ASCII code points come
// from one general category per code point, and its \s is the Unicode
// White_Space property. A matcher returns the length of the match at a
// position (0 for none); a step scans left to right for matches, as a
// regex iterator does.

// matchFunc returns the length of the match at pos in cps (whose classes
// are cls), or 0 when nothing matches there.
type matchFunc func(cps []rune, cls []uint8, pos int) int

// splitStep appends to out the lengths of the pieces that cover cps.
type splitStep func(cps []rune, cls []uint8, out []int32) []int32

// preTokenizer is a named sequence of split steps.
type preTokenizer struct {
	steps []splitStep
}

// split returns the lengths, in code points, of the words of cps.
func (p *preTokenizer) split(cps []rune, cls []uint8, pieces, scratch []int32) []int32 {
	pieces = append(pieces[:0], int32(len(cps)))
	for _, step := range p.steps {
		scratch = scratch[:0]
		off := 0
		for _, n := range pieces {
			scratch = step(cps[off:off+int(n)], cls[off:off+int(n)], scratch)
			off += int(n)
		}
		pieces, scratch = scratch, pieces
	}
	return pieces
}

// byMatch turns a matcher into a step: matches and the gaps between them
// become pieces.
func byMatch(m matchFunc) splitStep {
	return func(cps []rune, cls []uint8, out []int32) []int32 {
		gap := int32(0)
		for pos := 0; pos < len(cps); {
			if k := m(cps, cls, pos); k > 0 {
				if gap > 0 {
					out = append(out, gap)
					gap = 0
				}
				out = append(out, int32(k))
				pos += k
				continue
			}
			gap++
			pos++
		}
		if gap > 0 {
			out = append(out, gap)
		}
		return out
	}
}

// at is cls[i], or 0 past either end.
func at(cls []uint8, i int) uint8 {
	if i < 0 || i >= len(cls) {
		return 0
	}
	return cls[i]
}

// run counts the code points from pos that have one of the classes in c.
func run(cls []uint8, pos int, c uint8) int {
	n := 0
	for pos+n < len(cls) && cls[pos+n]&c != 0 {
		n++
	}
	return n
}

// runNot counts the code points from pos that have none of the classes
// in c.
func runNot(cls []uint8, pos int, c uint8) int {
	n := 0
	for pos+n < len(cls) && cls[pos+n]&c == 0 {
		n++
	}
	return n
}

// contraction matches 's 't 're 've 'm 'll 'd, optionally ignoring case.
func contraction(cps []rune, pos int, fold bool) int {
	if cps[pos] != '\'' || pos+1 >= len(cps) {
		return 0
	}
	lower := func(r rune) rune {
		if fold {
			return unicode.ToLower(r)
		}
		return r
	}
	switch lower(cps[pos+1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if pos+2 >= len(cps) {
		return 0
	}
	a, b := lower(cps[pos+1]), lower(cps[pos+2])
	if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
		return 3
	}
	return 0
}

// trailingSpace matches a run of whitespace that reaches the end of the
// piece (the \s+(?!\S) and \s+ alternatives that close most expressions):
// a run followed by more text leaves its last code point to the word
// after it.
func trailingSpace(cls []uint8, pos int) int {
	w := run(cls, pos, classSpace)
	if w > 1 && pos+w < len(cls) {
		return w - 1
	}
	return w
}

// matchGPT2 is 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+.
func matchGPT2(cps []rune, cls []uint8, pos int) int {
	if k := contraction(cps, pos, false); k > 0 {
		return k
	}
	lead, f := 0, cls[pos]
	if cps[pos] == ' ' {
		lead, f = 1, at(cls, pos+1)
	}
	switch {
	case f&classLetter != 0:
		return lead + run(cls, pos+lead, classLetter)
	case f&classNumber != 0:
		return lead + run(cls, pos+lead, classNumber)
	case f != 0 && f&(classSpace|classLetter|classNumber) == 0:
		return lead + runNot(cls, pos+lead, classSpace|classLetter|classNumber)
	}
	if k := trailingSpace(cls, pos); k > 0 {
		return k
	}
	return 1
}

// matchLlama3 returns the matcher of llama 3's expression,
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with at most maxDigits digits a word (0: no limit) and, with marks,
// \p{M} joining \p{L} (Qwen 3.5's [\p{L}\p{M}]+).
func matchLlama3(maxDigits int, marks bool) matchFunc {
	letters := classLetter
	if marks {
		letters |= classMark
	}
	return func(cps []rune, cls []uint8, pos int) int {
		if k := contraction(cps, pos, true); k > 0 {
			return k
		}
		c, f := cps[pos], cls[pos]
		if c != '\r' && c != '\n' && f&classNumber == 0 && (f&letters != 0 || at(cls, pos+1)&letters != 0) {
			return 1 + run(cls, pos+1, letters)
		}
		if f&classNumber != 0 {
			k := run(cls, pos, classNumber)
			if maxDigits > 0 {
				k = min(k, maxDigits)
			}
			return k
		}
		lead, f2 := 0, f
		if c == ' ' {
			lead, f2 = 1, at(cls, pos+1)
		}
		if f2&(classSpace|letters|classNumber) == 0 {
			p := pos + lead
			if f2 != 0 {
				p += runNot(cls, p, classSpace|letters|classNumber)
			}
			for p < len(cps) && (cps[p] == '\r' || cps[p] == '\n') {
				p++
			}
			return p - pos
		}
		w, nl := 0, 0
		for pos+w < len(cps) && cls[pos+w]&classSpace != 0 {
			if cps[pos+w] == '\r' || cps[pos+w] == '\n' {
				nl = w + 1
			}
			w++
		}
		if nl > 0 {
			return nl
		}
		if k := trailingSpace(cls, pos); k > 0 {
			return k
		}
		return 1
	}
}

// matchNewlines is [^\n]+|[\n]+.
func matchNewlines(cps []rune, _ []uint8, pos int) int {
	nl := cps[pos] == '\n'
	k := 1
	for pos+k < len(cps) && (cps[pos+k] == '\n') == nl {
		k++
	}
	return k
}

// matchClassRun matches a run of code points in class c, of at most
// limit code points (0: no limit).
func matchClassRun(c uint8, limit int) matchFunc {
	return func(_ []rune, cls []uint8, pos int) int {
		k := run(cls, pos, c)
		if limit > 0 {
			k = min(k, limit)
		}
		return k
	}
}

// matchSet matches a run of code points for which in is true, optionally
// led by one whitespace code point (\s?[set]+), or exactly n of them
// when exact is set.
func matchSet(in func(r rune, c uint8) bool, leadSpace bool, exact int) matchFunc {
	return func(cps []rune, cls []uint8, pos int) int {
		if exact > 0 {
			if pos+exact > len(cps) {
				return 0
			}
			for i := range exact {
				if !in(cps[pos+i], cls[pos+i]) {
					return 0
				}
			}
			return exact
		}
		lead := 0
		if leadSpace && cls[pos]&classSpace != 0 && pos+1 < len(cps) && in(cps[pos+1], cls[pos+1]) {
			lead = 1
		}
		k := 0
		for pos+lead+k < len(cps) && in(cps[pos+lead+k], cls[pos+lead+k]) {
			k++
		}
		if k == 0 {
			return 0
		}
		return lead + k
	}
}

// splitTrailingSpace is \s+$: the whitespace that ends a piece.
func splitTrailingSpace(_ []rune, cls []uint8, out []int32) []int32 {
	t := len(cls)
	for t > 0 && cls[t-1]&classSpace != 0 {
		t--
	}
	if t > 0 {
		out = append(out, int32(t))
	}
	if t < len(cls) {
		out = append(out, int32(len(cls)-t))
	}
	return out
}
