package engine

import (
	"strings"

	"switchyard.dev/libs/engine/tokenizer"
)

// textStream turns sampled tokens into text deltas. It holds back the
// bytes of an incomplete UTF-8 code point and, when stop strings are set,
// the last len(longest stop)-1 bytes, which might begin a stop string that
// the next token completes.
type textStream struct {
	tok     tokenizer.Tokenizer
	prev    uint32
	pending []byte
	stops   []string
	hold    int
}

func newTextStream(tok tokenizer.Tokenizer, prev uint32, stops []string) *textStream {
	t := &textStream{tok: tok, prev: prev, stops: stops}
	for _, s := range stops {
		t.hold = max(t.hold, len(s)-1)
	}
	return t
}

// push adds token's text and returns the text that can be emitted now; if
// a stop string appeared, it returns the text before it and stopped=true.
func (t *textStream) push(token uint32) (emit string, stopped bool) {
	t.pending = append(t.pending, t.tok.Piece(t.prev, token)...)
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
			return s[:at], true
		}
	}
	cut := min(len(t.pending)-t.hold, tokenizer.ValidUTF8Prefix(t.pending))
	for cut > 0 && cut < len(t.pending) && t.pending[cut]&0xC0 == 0x80 {
		cut-- // never split a code point when holding for stop strings
	}
	if cut <= 0 {
		return "", false
	}
	emit = string(t.pending[:cut])
	t.pending = append(t.pending[:0], t.pending[cut:]...)
	return emit, false
}

// flush returns whatever is held, at the end of generation.
func (t *textStream) flush() string {
	s := string(t.pending)
	t.pending = t.pending[:0]
	return s
}
