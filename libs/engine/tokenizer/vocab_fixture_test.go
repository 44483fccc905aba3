package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// hexByte is the <0xXX> spelling of byte b.
func hexByte(b int) string { return fmt.Sprintf("<0x%02X>", b) }

// spmFixture is a small SentencePiece vocabulary: <unk> <s> </s>, the 256
// byte fallbacks, then pieces scored in order (earlier higher), then
// chat markers and a user-defined word.
func spmFixture(t testing.TB) Vocab {
	t.Helper()
	v := Vocab{Model: ModelSPM, BOS: 1, EOS: 2, UNK: 0, AddBOS: true, AddSpacePrefix: true}
	add := func(s string, score float32, typ TokenType) {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	add("<unk>", 0, TokenUnknown)
	add("<s>", 0, TokenControl)
	add("</s>", 0, TokenControl)
	for b := range 256 {
		add(hexByte(b), 0, TokenByte)
	}
	for i, p := range []string{"▁", "e", "h", "l", "o", "w", "r", "d", "a", "b", "é", "ll", "he", "▁h", "▁he", "hell", "▁hell", "▁hello", "or", "▁w", "▁wor", "ld", "▁world", "ab", "aa", "▁▁", "▁a", "ba", "<", ">", "s", "<s"} {
		add(p, -float32(i), TokenNormal)
	}
	add("<|im_start|>", 0, TokenControl)
	add("<|im_end|>", 0, TokenControl)
	add("<tool>", 0, TokenUserDefined)
	return v
}

// byteLevelFixture is a small byte-level BPE vocabulary: the 256 byte
// code points, the results of merges, then special tokens.
func byteLevelFixture(t testing.TB, pre string) Vocab {
	t.Helper()
	bl := byteLevelMap()
	v := Vocab{Model: ModelBPE, Pre: pre, BOS: NoToken, EOS: NoToken, UNK: NoToken}
	add := func(s string, typ TokenType) {
		if !slices.Contains(v.Tokens, s) {
			v.Tokens = append(v.Tokens, s)
			v.Types = append(v.Types, typ)
		}
	}
	for b := range 256 {
		add(bl.enc[b], TokenNormal)
	}
	for _, m := range []string{"Ġ Ġ", "ĠĠ ĠĠ", "Ċ Ċ", "Ġ h", "Ġ w", "h e", "Ġh e", "l l", "Ġhe ll", "he ll", "Ġhell o", "hell o", "o r", "Ġw or", "l d", "Ġwor ld", "a a", "aa a", "a aa", "1 2", "12 3", "' s", "Ã ©", "Ġ Ã©"} {
		l, r, _ := strings.Cut(m, " ")
		v.Merges = append(v.Merges, [2]string{l, r})
		add(l+r, TokenNormal)
	}
	add("<|endoftext|>", TokenControl)
	add("<|im_start|>", TokenControl)
	add("<|im_end|>", TokenControl)
	add("<tool>", TokenUserDefined)
	v.EOS = uint32(slices.Index(v.Tokens, "<|endoftext|>"))
	v.BOS = v.EOS
	return v
}

func mustVocab(t testing.TB, v Vocab) *VocabTokenizer {
	t.Helper()
	tok, err := NewVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ids maps token texts to ids, for readable expectations.
func ids(t testing.TB, tok *VocabTokenizer, texts ...string) []uint32 {
	t.Helper()
	out := make([]uint32, len(texts))
	for i, s := range texts {
		id, ok := tok.token(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		out[i] = id
	}
	return out
}

// naiveMerge is llama.cpp's merge loop without a heap: rescan every
// adjacent pair, merge the best (the leftmost of equals), repeat. pair
// ranks a pair of texts (smaller first). It returns the merged texts.
func naiveMerge(text string, pair func(l, r string) (uint64, bool)) []string {
	var syms []string
	for i := 0; i < len(text); {
		l := min(utf8Len(text[i]), len(text)-i)
		syms = append(syms, text[i:i+l])
		i += l
	}
	for {
		best, at := uint64(0), -1
		for i := 0; i+1 < len(syms); i++ {
			if p, ok := pair(syms[i], syms[i+1]); ok && (at < 0 || p < best) {
				best, at = p, i
			}
		}
		if at < 0 {
			return syms
		}
		syms[at] += syms[at+1]
		syms = slices.Delete(syms, at+1, at+2)
	}
}

// naiveEmit turns merged texts into ids: the token, or each byte's
// fallback.
func naiveEmit(tok *VocabTokenizer, out []uint32, syms []string) []uint32 {
	for _, s := range syms {
		if id, ok := tok.token(s); ok {
			out = append(out, id)
			continue
		}
		for i := range len(s) {
			if b := tok.byteTok[s[i]]; b != NoToken {
				out = append(out, b)
			}
		}
	}
	return out
}

// naiveSPM encodes a text without special tokens the way llama.cpp's
// SentencePiece session does, by the naive loop over the whole text.
func naiveSPM(tok *VocabTokenizer, text string) []uint32 {
	if text == "" {
		return nil
	}
	if tok.prefix {
		text = " " + text
	}
	text = strings.ReplaceAll(text, " ", spaceMark)
	syms := naiveMerge(text, func(l, r string) (uint64, bool) {
		id, ok := tok.token(l + r)
		if !ok {
			return 0, false
		}
		return uint64(scoreKey(tok.scores[id])), true
	})
	return naiveEmit(tok, nil, syms)
}

// naiveBPE encodes a text without special tokens as llama.cpp's BPE
// session: the words of the pre-tokenizer, each merged by the naive
// loop over the merges as given (the first of repeats wins).
func naiveBPE(tok *VocabTokenizer, v Vocab, text string) []uint32 {
	ranks := map[[2]string]uint64{}
	for i, m := range v.Merges {
		if _, dup := ranks[m]; !dup {
			ranks[m] = uint64(i)
		}
	}
	if text == "" {
		return nil
	}
	if tok.prefix {
		text = " " + text
	}
	if tok.kind == kindBPERaw {
		text = strings.ReplaceAll(text, " ", spaceMark)
	}
	cps := []rune(text)
	tab := classTable()
	cls := make([]uint8, len(cps))
	for i, r := range cps {
		cls[i] = classOf(tab, r)
	}
	var out []uint32
	off := 0
	bl := byteLevelMap()
	for _, n := range tok.pre.split(cps, cls, nil, nil) {
		word := string(cps[off : off+int(n)])
		off += int(n)
		if tok.kind == kindBPE {
			var b strings.Builder
			for i := range len(word) {
				b.WriteString(bl.enc[word[i]])
			}
			word = b.String()
		}
		if id, ok := tok.token(word); ok && (tok.ignoreMerges || (tok.kind == kindBPERaw && onlyNewlines([]byte(word)))) {
			out = append(out, id)
			continue
		}
		syms := naiveMerge(word, func(l, r string) (uint64, bool) {
			rank, ok := ranks[[2]string{l, r}]
			return rank, ok
		})
		out = naiveEmit(tok, out, syms)
	}
	return out
}
