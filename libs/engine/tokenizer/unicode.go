package tokenizer

import (
	"sync"
	"unicode"
)

// Code point classes the pre-tokenizers test, as llama.cpp's unicode
// flags: \p{L}, \p{N}, \p{M}, \p{P}, \p{S} by Unicode general category,
// and \s as the White_Space property. classAny is set for every code
// point, so a class of 0 means "past the end of the fragment".
const (
	classLetter uint8 = 1 << iota
	classNumber
	classMark
	classPunct
	classSymbol
	classSpace
	classAny
)

// classTable holds the classes of the Basic Multilingual Plane, built
// once; code points above it are classified on the fly.
var classTable = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := range rune(len(t)) {
		t[r] = computeClass(r)
	}
	return &t
})

func computeClass(r rune) uint8 {
	c := classAny
	switch {
	case unicode.IsLetter(r):
		c |= classLetter
	case unicode.IsNumber(r):
		c |= classNumber
	case unicode.IsMark(r):
		c |= classMark
	case unicode.IsPunct(r):
		c |= classPunct
	case unicode.IsSymbol(r):
		c |= classSymbol
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= classSpace
	}
	return c
}

// classOf returns r's classes.
func classOf(tab *[0x10000]uint8, r rune) uint8 {
	if r >= 0 && r < 0x10000 {
		return tab[r]
	}
	return computeClass(r)
}

// decodeRunes appends the code points of s to dst. An invalid byte
// becomes U+FFFD, one per byte, as llama.cpp's decoder does for the
// sequences it rejects. (It also decodes overlong forms and surrogates,
// which Go rejects; a prompt that arrived as JSON holds none.)
func decodeRunes(dst []rune, s string) []rune {
	for _, r := range s {
		dst = append(dst, r)
	}
	return dst
}

// utf8Len is the length of the UTF-8 sequence that lead byte b starts,
// judged by its high bits alone (llama.cpp's unicode_len_utf8): the
// tokenizers cut text into symbols with it, without validating.
func utf8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}

// byteLevel is GPT-2's reversible map from bytes to printable code
// points: byte-level BPE vocabularies spell every token in it.
type byteLevel struct {
	enc [256]string // byte -> its code point, UTF-8
	dec [324]int16  // code point -> byte, or -1 (all mapped code points are below 324)
}

var byteLevelMap = sync.OnceValue(func() *byteLevel {
	m := &byteLevel{}
	for i := range m.dec {
		m.dec[i] = -1
	}
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !printable(b) {
			r = next
			next++
		}
		m.enc[b] = string(r)
		m.dec[r] = int16(b)
	}
	return m
})

// decodeByteLevel maps a byte-level token's code points back to bytes.
// A token with a code point outside the map (vocabularies carry a few
// raw ones) decodes to its own UTF-8 bytes, as Hugging Face's ByteLevel
// decoder does.
func (m *byteLevel) decode(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(m.dec) || m.dec[r] < 0 {
			return []byte(s)
		}
		out = append(out, byte(m.dec[r]))
	}
	return out
}
