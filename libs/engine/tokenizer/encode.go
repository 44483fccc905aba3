package tokenizer

import (
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// VocabSize implements Tokenizer.
func (t *VocabTokenizer) VocabSize() int { return int(t.n) }

// BOS implements Tokenizer: the begin-of-sequence id, or NoToken.
func (t *VocabTokenizer) BOS() uint32 { return t.bos }

// EOS implements Tokenizer: the end-of-sequence id, or NoToken.
func (t *VocabTokenizer) EOS() uint32 { return t.eos }

// AddBOS reports whether the model wants BOS before a prompt (GGUF's
// tokenizer.ggml.add_bos_token, with llama.cpp's defaults).
func (t *VocabTokenizer) AddBOS() bool { return t.addBOS && t.bos != NoToken }

// AddEOS reports whether the model wants EOS after a prompt.
func (t *VocabTokenizer) AddEOS() bool { return t.addEOS && t.eos != NoToken }

// MaxPieceBytes implements Tokenizer.
func (t *VocabTokenizer) MaxPieceBytes() int { return t.maxPiece }

// Token returns the text of token id as the vocabulary spells it.
func (t *VocabTokenizer) Token(id uint32) string {
	if id >= t.n {
		return ""
	}
	return t.tokens[id]
}

// IsControl reports whether id is a control (or unknown) token: one that
// decodes to nothing and that plain Encode never produces from text.
func (t *VocabTokenizer) IsControl(id uint32) bool {
	return id < t.n && t.attrs[id]&(attrControl|attrUnknown) != 0
}

// Piece implements Tokenizer. After BOS the leading space of a
// SentencePiece token, the one AddSpacePrefix put there, is dropped.
func (t *VocabTokenizer) Piece(prev, token uint32) []byte {
	if token >= t.n {
		return nil
	}
	p := t.pieces[token]
	if t.prefix && prev == t.bos && len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	return p
}

// Encode implements Tokenizer with llama.cpp's parse_special=false:
// control tokens in the text are text (a prompt cannot forge them), while
// user-defined tokens still match.
func (t *VocabTokenizer) Encode(text string, bos, eos bool) []uint32 {
	return t.encode(text, bos, eos, false)
}

// EncodeSpecial is Encode with llama.cpp's parse_special=true: control
// tokens spelled in the text ("<|im_start|>" from a chat template) become
// those tokens.
func (t *VocabTokenizer) EncodeSpecial(text string, bos, eos bool) []uint32 {
	return t.encode(text, bos, eos, true)
}

// scratch holds one encode's reusable buffers.
type scratch struct {
	frags   []fragment
	occ     []occurrence
	claim   []uint8
	cps     []rune
	cls     []uint8
	pieces  []int32
	pieces2 []int32
	word    []byte
	syms    []symbol
	heap    candHeap
	// words caches byte-level words: word -> span of wordIDs.
	words   map[string][2]int32
	wordIDs []uint32
}

func (t *VocabTokenizer) encode(text string, bos, eos, special bool) []uint32 {
	out := make([]uint32, 0, len(text)/3+4)
	if bos && t.bos != NoToken {
		out = append(out, t.bos)
	}
	s, _ := t.scratch.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	s.frags = t.specials.partition(s, text, special)
	afterSpecial := true
	for _, f := range s.frags {
		if f.id != NoToken {
			out = append(out, f.id)
			afterSpecial = true
			continue
		}
		seg := text[f.start:f.end]
		if t.nfc {
			seg = norm.NFC.String(seg)
		}
		startsWithSpace := seg[0] == ' ' || strings.HasPrefix(seg, spaceMark)
		prefix := t.prefix && afterSpecial && (!t.prefixFirst || f.start == 0) && (!t.prefixSkip || !startsWithSpace)
		if t.kind == kindSPM {
			out = t.encodeSPM(s, out, seg, prefix)
		} else {
			out = t.encodeBPE(s, out, seg, prefix)
		}
		afterSpecial = false
	}
	if eos && t.eos != NoToken {
		out = append(out, t.eos)
	}
	t.scratch.Put(s)
	return slices.Clip(out)
}
