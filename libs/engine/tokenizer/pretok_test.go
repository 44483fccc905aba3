package tokenizer

import (
	"slices"
	"testing"
)

// words splits text with pre-tokenizer name.
func words(t *testing.T, name, text string) []string {
	t.Helper()
	p, err := lookupPre(name)
	if err != nil {
		t.Fatal(err)
	}
	cps := []rune(text)
	tab := classTable()
	cls := make([]uint8, len(cps))
	for i, r := range cps {
		cls[i] = classOf(tab, r)
	}
	var out []string
	off := 0
	for _, n := range p.split(cps, cls, nil, nil) {
		out = append(out, string(cps[off:off+int(n)]))
		off += int(n)
	}
	return out
}

// TestPreTokenizers checks the hand-written splitters on the places the
// expressions differ: lookahead on whitespace, digit groups, newline
// runs, contractions, letters after punctuation.
func TestPreTokenizers(t *testing.T) {
	t.Parallel()
	const text = "Hello world  !!\n\n 3333333 don't\t\tDON'T ça.va"
	tests := []struct {
		pre  string
		text string
		want []string
	}{
		{"gpt-2", text, []string{"Hello", " world", " ", " !!", "\n\n", " 3333333", " don", "'t", "\t", "\t", "DON", "'", "T", " ça", ".", "va"}},
		{"llama-bpe", text, []string{"Hello", " world", " ", " !!\n\n", " ", "333", "333", "3", " don", "'t", "\t", "\tDON", "'T", " ça", ".va"}},
		{"qwen2", "x 123\r\n\r\n  y", []string{"x", " ", "1", "2", "3", "\r\n\r\n", " ", " y"}},
		{"qwen35", "e\u0301te\u0301", []string{"e\u0301te\u0301"}},
		{"llama-bpe", "e\u0301te\u0301", []string{"e", "\u0301te", "\u0301"}},
		{"starcoder", "x12 ab", []string{"x", "1", "2", " ab"}},
		{"default", "a+b 12345", []string{"a", "+", "b", " ", "123", "45"}},
		{"gemma4", "a▁b\n\nc", []string{"a▁b", "\n\n", "c"}},
		{"deepseek-llm", "Hi 你好 12  ", []string{"Hi", " ", "你好", " ", "12", "  "}},
		{"deepseek-coder", "Hi, 你好 12", []string{"Hi", ",", " ", "你好", " ", "1", "2"}},
		{"gpt-2", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.pre+" "+tc.text, func(t *testing.T) {
			t.Parallel()
			if got := words(t, tc.pre, tc.text); !slices.Equal(got, tc.want) {
				t.Errorf("split(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}
