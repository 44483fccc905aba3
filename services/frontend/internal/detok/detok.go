// Package detok turns a stream of generated token ids into text deltas,
// applying stop strings.
//
// The frontend decodes text itself instead of trusting each worker's text
// field, because a request that migrates between workers must read as one
// uninterrupted stream: bytes a dead worker held back (an incomplete UTF-8
// code point, or a possible stop-string prefix) would otherwise be lost.
// The algorithm is the engine's (libs/engine text.go) step for step, so an
// undisturbed request yields exactly the text the worker would have sent.
package detok

import (
	"strings"

	"switchyard.dev/libs/engine/tokenizer"
)

// Stream is the text state of one generation. It is not safe for
// concurrent use.
type Stream struct {
	tok     tokenizer.Tokenizer
	prev    uint32
	pending []byte
	stops   []string
	hold    int
}

// New starts a stream whose first token follows prev (the last prompt
// token), ending at any of stops.
func New(tok tokenizer.Tokenizer, prev uint32, stops []string) *Stream {
	s := &Stream{tok: tok, prev: prev, stops: stops}
	for _, stop := range stops {
		s.hold = max(s.hold, len(stop)-1)
	}
	return s
}

// Push adds token's text and returns what can be emitted now. When a stop
// string appears it returns the text before it and stopped=true; the
// stream must not be used afterwards.
func (s *Stream) Push(token uint32) (emit string, stopped bool) {
	s.pending = append(s.pending, s.tok.Piece(s.prev, token)...)
	s.prev = token
	if len(s.stops) > 0 {
		text := string(s.pending)
		at := -1
		for _, stop := range s.stops {
			if i := strings.Index(text, stop); i >= 0 && (at < 0 || i < at) {
				at = i
			}
		}
		if at >= 0 {
			s.pending = s.pending[:0]
			return text[:at], true
		}
	}
	cut := min(len(s.pending)-s.hold, tokenizer.ValidUTF8Prefix(s.pending))
	for cut > 0 && cut < len(s.pending) && s.pending[cut]&0xC0 == 0x80 {
		cut-- // never split a code point while holding for stop strings
	}
	if cut <= 0 {
		return "", false
	}
	emit = string(s.pending[:cut])
	s.pending = append(s.pending[:0], s.pending[cut:]...)
	return emit, false
}

// Flush returns what is held back, at the end of a generation.
func (s *Stream) Flush() string {
	out := string(s.pending)
	s.pending = s.pending[:0]
	return out
}
