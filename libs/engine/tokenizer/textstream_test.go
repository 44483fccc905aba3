package tokenizer_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"switchyard.dev/libs/engine/tokenizer"
)

func TestStream(t *testing.T) {
	t.Parallel()
	tok, err := tokenizer.NewBytes(300)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		text    string
		stops   []string
		want    string
		stopped bool
	}{
		{name: "plain", text: "hello world", want: "hello world"},
		{name: "utf8 split", text: "héllo ✓", want: "héllo ✓"},
		{name: "stop", text: "one END two", stops: []string{"END"}, want: "one ", stopped: true},
		{name: "earliest stop wins", text: "abcXYZ", stops: []string{"XYZ", "c"}, want: "ab", stopped: true},
		{name: "partial stop at end flushed", text: "abEN", stops: []string{"END"}, want: "abEN"},
		// A cut character: each byte that is no UTF-8 is one U+FFFD.
		{name: "malformed run", text: "\xe2\x9cAB\xff", want: "\uFFFD\uFFFDAB\uFFFD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tokenizer.NewTextStream(tok, tokenizer.BOS, tc.stops)
			var b strings.Builder
			stopped := false
			for _, id := range tok.Encode(tc.text, false, false) {
				out, st := s.Push(id)
				b.WriteString(out)
				if st {
					stopped = true
					break
				}
			}
			if !stopped {
				b.WriteString(s.Flush())
			}
			if b.String() != tc.want || stopped != tc.stopped {
				t.Fatalf("got %q stopped=%v, want %q stopped=%v", b.String(), stopped, tc.want, tc.stopped)
			}
		})
	}
}

// Pieces never split a code point: every delta is valid UTF-8.
func TestDeltasAreValidUTF8(t *testing.T) {
	t.Parallel()
	tok, _ := tokenizer.NewBytes(300)
	s := tokenizer.NewTextStream(tok, tokenizer.BOS, []string{"zz"})
	for _, id := range tok.Encode("ąęść €uro 𝄞 music", false, false) {
		out, _ := s.Push(id)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid delta %q", out)
		}
	}
}
