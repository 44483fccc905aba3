package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// TextStream turns generated tokens into text deltas. It holds back the
// bytes of an incomplete UTF-8 code point and, when stop strings are set,
// the last len(longest stop)-1 bytes, which might begin a stop string that
// the next token completes. Each byte that can never form UTF-8 (a stray
// continuation byte, a lead byte followed by ASCII, 0xFF) is emitted as one
// U+FFFD, as encoding/json writes it: text leaves the engine as valid UTF-8,
// which protobuf string fields and JSON require, and the frontend's
// completions text_offset counts characters the same way.
// The engine and the frontend both use it, so that text decoded by either
// (the frontend re-decodes to keep a migrated request seamless) is identical.
// It is not safe for concurrent use.
type TextStream struct {
	tok     Tokenizer
	prev    uint32
	pending []byte
	stops   []string
	hold    int
}

// NewTextStream starts the text of a generation whose first token follows
// prev (the last prompt token), ending at any of stops.
func NewTextStream(tok Tokenizer, prev uint32, stops []string) *TextStream {
	t := &TextStream{tok: tok, prev: prev, stops: stops}
	for _, s := range stops {
		t.hold = max(t.hold, len(s)-1)
	}
	return t
}

// Push adds token's text and returns the text that can be emitted now; if
// a stop string appeared, it returns the text before it and stopped=true.
func (t *TextStream) Push(token uint32) (emit string, stopped bool) {
	return t.PushPiece(token, t.tok.Piece(t.prev, token))
}

// Prev is the token the next one follows (the last pushed, or the prev
// the stream started with).
func (t *TextStream) Prev() uint32 { return t.prev }

// PushPiece is Push for a caller that already decoded token after Prev:
// piece must be the tokenizer's Piece(Prev(), token).
func (t *TextStream) PushPiece(token uint32, piece []byte) (emit string, stopped bool) {
	t.pending = append(t.pending, piece...)
	t.prev = token
	if len(t.stops) > 0 {
		s := string(t.pending)
		at := -1
		for _, stop := range t.stops {
			if i := strings.Index(s, stop); i >= 0 && (at < 0 || i < at) {
				at = i
			}
		}
		if at >= 0 {
			t.pending = t.pending[:0]
			return ValidUTF8(s[:at]), true
		}
	}
	cut := min(len(t.pending)-t.hold, ValidUTF8Prefix(t.pending))
	for cut > 0 && cut < len(t.pending) && t.pending[cut]&0xC0 == 0x80 {
		cut-- // never split a code point when holding for stop strings
	}
	if cut <= 0 {
		return "", false
	}
	emit = ValidUTF8(string(t.pending[:cut]))
	t.pending = append(t.pending[:0], t.pending[cut:]...)
	return emit, false
}

// Flush returns whatever is held, at the end of generation.
func (t *TextStream) Flush() string {
	s := string(t.pending)
	t.pending = t.pending[:0]
	return ValidUTF8(s)
}

// ValidUTF8 replaces each byte of s that is not UTF-8 with U+FFFD (not each
// run of them, as strings.ToValidUTF8 does), as encoding/json writes it.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}
