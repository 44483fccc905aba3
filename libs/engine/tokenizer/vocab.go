package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// NoToken stands for "none" where a token id is expected: the BOS of a
// vocabulary that has none, a byte with no fallback token. It is never a
// valid id (NewVocab refuses vocabularies that large).
const NoToken uint32 = math.MaxUint32

// ErrUnsupported is wrapped by errors about vocabularies, pre-tokenizers
// and tokenizer.json forms this package does not implement.
var ErrUnsupported = errors.New("tokenizer: unsupported")

// Tokenizer models (GGUF's tokenizer.ggml.model).
const (
	// ModelSPM is SentencePiece BPE as llama.cpp runs it: merges by token
	// score over code points, spaces as U+2581, <0xXX> byte fallback.
	ModelSPM = "llama"
	// ModelBPE is byte-level BPE (GPT-2's): text cut into words by the
	// pre-tokenizer named by Vocab.Pre, bytes spelled as printable code
	// points, merges by rank.
	ModelBPE = "gpt2"
	// ModelBPERaw is BPE by rank over raw UTF-8 with spaces as U+2581,
	// newline runs kept apart, and <0xXX> byte fallback: llama.cpp's
	// "gemma4", and the form of Hugging Face's tokenizer.json for
	// SentencePiece models (Llama 2, Mistral, Gemma).
	ModelBPERaw = "gemma4"
)

// TokenType is llama.cpp's token type (GGUF tokenizer.ggml.token_type).
type TokenType int32

// Token types, as GGUF numbers them.
const (
	TokenUndefined   TokenType = 0
	TokenNormal      TokenType = 1
	TokenUnknown     TokenType = 2
	TokenControl     TokenType = 3 // BOS, EOS, chat markers: matched in text only when asked, decode to nothing
	TokenUserDefined TokenType = 4 // added words: always matched in text, decode to their text
	TokenUnused      TokenType = 5
	TokenByte        TokenType = 6 // <0xXX> byte fallback
)

// Vocab is everything a VocabTokenizer is built from: a GGUF file's
// tokenizer.ggml.* entries (see gguf.Vocab) or a Hugging Face
// tokenizer.json (see ParseHFJSON), after the loader's defaults.
type Vocab struct {
	Model string // ModelSPM, ModelBPE or ModelBPERaw
	// Pre names the pre-tokenizer of a ModelBPE vocabulary, as GGUF's
	// tokenizer.ggml.pre ("gpt-2", "llama-bpe", "qwen2", ...; "" is
	// "default").
	Pre    string
	Tokens []string
	// Scores are the SentencePiece merge priorities (higher first); nil
	// means all 0.
	Scores []float32
	// Types are the token types; nil means all TokenNormal.
	Types []TokenType
	// Merges are the BPE merges, highest priority first.
	Merges [][2]string
	// BOS, EOS and UNK are ids or NoToken.
	BOS, EOS, UNK uint32
	// AddBOS and AddEOS say whether the model wants BOS and EOS around a
	// prompt (the frontend asks AddBOS before Encode).
	AddBOS, AddEOS bool
	// AddSpacePrefix puts a space before the first piece of text and
	// before the text after each special token (SentencePiece's dummy
	// prefix). SpacePrefixFirstOnly limits it to text at the very start;
	// SpacePrefixUnlessSpace skips it for text that starts with a space
	// (Hugging Face's Metaspace with prepend_scheme "first").
	AddSpacePrefix, SpacePrefixFirstOnly, SpacePrefixUnlessSpace bool
	// IgnoreMerges emits a word that is a token as that token without
	// merging (llama 3's tokenizer).
	IgnoreMerges bool
	// NFC normalizes text to Unicode NFC before tokenizing it (a Hugging
	// Face normalizer; llama.cpp never normalizes).
	NFC bool
	// LStrip and RStrip list special tokens that swallow the whitespace
	// before or after them in the text.
	LStrip, RStrip []uint32
}

// Token attributes, llama.cpp's llama_token_attr bits.
const (
	attrUnknown uint8 = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrLStrip
	attrRStrip
)

func typeAttr(t TokenType) uint8 {
	switch t {
	case TokenNormal:
		return attrNormal
	case TokenUnknown:
		return attrUnknown
	case TokenControl:
		return attrControl
	case TokenUserDefined:
		return attrUserDefined
	case TokenUnused:
		return attrUnused
	case TokenByte:
		return attrByte
	}
	return 0
}

type modelKind uint8

const (
	kindSPM modelKind = iota
	kindBPE
	kindBPERaw
)

// mergeRule is a BPE merge: its rank and the id of the merged string
// (an id at or above the vocabulary size names a string that is no token).
type mergeRule struct {
	rank int32
	id   uint32
}

// VocabTokenizer tokenizes text with a real model's vocabulary,
// token for token as llama.cpp does with the same vocabulary. It is
// immutable and safe for concurrent use.
type VocabTokenizer struct {
	kind   modelKind
	n      uint32 // vocabulary size
	tokens []string
	attrs  []uint8
	scores []float32
	// index maps text to id: the vocabulary (the last of equal tokens, as
	// llama.cpp's map keeps), then, for BPE, the strings merges name that
	// are no token, at ids from n up.
	index map[string]uint32
	// BPE
	pre          *preTokenizer
	merges       map[uint64]mergeRule
	ignoreMerges bool
	// joinsMark holds the symbols that may merge with a U+2581 after
	// them (see independent).
	joinsMark map[string]struct{}
	// byteTok is the fallback token of each byte: <0xXX> (or, for SPM,
	// the one-byte token, then UNK); for byte-level BPE the one-byte
	// token, which is how llama.cpp spells a byte of a string that is no
	// token. NoToken drops the byte.
	byteTok [256]uint32

	pieces                          [][]byte
	bos, eos, unk                   uint32
	addBOS, addEOS                  bool
	prefix, prefixFirst, prefixSkip bool
	nfc                             bool
	maxPiece                        int
	specials                        *specialMatcher
	scratch                         sync.Pool
}

// NewVocab builds a tokenizer from v, checking that its parts agree.
func NewVocab(v Vocab) (*VocabTokenizer, error) {
	t := &VocabTokenizer{
		n: uint32(len(v.Tokens)), tokens: v.Tokens, bos: v.BOS, eos: v.EOS, unk: v.UNK,
		addBOS: v.AddBOS, addEOS: v.AddEOS, nfc: v.NFC, ignoreMerges: v.IgnoreMerges,
		prefix: v.AddSpacePrefix, prefixFirst: v.SpacePrefixFirstOnly, prefixSkip: v.SpacePrefixUnlessSpace,
	}
	switch v.Model {
	case ModelSPM:
		t.kind = kindSPM
	case ModelBPE:
		t.kind = kindBPE
	case ModelBPERaw:
		t.kind = kindBPERaw
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q (supported: %q, %q, %q)", ErrUnsupported, v.Model, ModelSPM, ModelBPE, ModelBPERaw)
	}
	if err := t.checkVocab(v); err != nil {
		return nil, err
	}
	t.attrs = make([]uint8, t.n)
	for i := range t.attrs {
		t.attrs[i] = attrNormal
		if v.Types != nil {
			t.attrs[i] = typeAttr(v.Types[i])
		}
	}
	for _, id := range v.LStrip {
		t.attrs[id] |= attrLStrip
	}
	for _, id := range v.RStrip {
		t.attrs[id] |= attrRStrip
	}
	t.scores = make([]float32, t.n)
	if v.Scores != nil {
		copy(t.scores, v.Scores)
	}
	t.index = make(map[string]uint32, len(v.Tokens))
	for i, s := range v.Tokens {
		if s != "" {
			t.index[s] = uint32(i)
		}
	}
	switch t.kind {
	case kindBPE:
		p, err := lookupPre(v.Pre)
		if err != nil {
			return nil, err
		}
		t.pre = p
	case kindBPERaw:
		t.pre = preTokenizers["gemma4"]
	}
	if t.kind != kindSPM {
		if err := t.loadMerges(v.Merges); err != nil {
			return nil, err
		}
	}
	switch t.kind {
	case kindSPM:
		t.initJoinsMark(slices.Values(t.tokens))
	case kindBPERaw:
		t.initJoinsMark(func(yield func(string) bool) {
			for _, m := range v.Merges {
				if !yield(m[0] + m[1]) {
					return
				}
			}
		})
	}
	t.initBytes()
	t.initPieces()
	t.specials = newSpecialMatcher(t.tokens, t.attrs)
	t.maxPiece = t.pieceBound()
	return t, nil
}

func (t *VocabTokenizer) checkVocab(v Vocab) error {
	switch {
	case len(v.Tokens) == 0:
		return fmt.Errorf("%w: no tokens", ErrFormat)
	case len(v.Tokens) >= 1<<31:
		return fmt.Errorf("%w: %d tokens", ErrFormat, len(v.Tokens))
	case v.Scores != nil && len(v.Scores) < len(v.Tokens):
		return fmt.Errorf("%w: %d scores for %d tokens", ErrFormat, len(v.Scores), len(v.Tokens))
	case v.Types != nil && len(v.Types) < len(v.Tokens):
		return fmt.Errorf("%w: %d token types for %d tokens", ErrFormat, len(v.Types), len(v.Tokens))
	case len(v.Merges) >= 1<<24:
		return fmt.Errorf("%w: %d merges", ErrFormat, len(v.Merges))
	}
	for _, s := range []struct {
		name string
		id   uint32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"UNK", v.UNK}} {
		if s.id != NoToken && s.id >= t.n {
			return fmt.Errorf("%w: %s id %d outside the %d tokens", ErrFormat, s.name, s.id, t.n)
		}
	}
	for _, ids := range [][]uint32{v.LStrip, v.RStrip} {
		for _, id := range ids {
			if id >= t.n {
				return fmt.Errorf("%w: strip id %d outside the %d tokens", ErrFormat, id, t.n)
			}
		}
	}
	return nil
}

// loadMerges builds the merge table keyed by the ids of the two halves,
// giving the strings merges name that are no token ids of their own from
// t.n up, so a merge of any two strings is a map lookup. The first of
// repeated merges wins, as in llama.cpp.
func (t *VocabTokenizer) loadMerges(merges [][2]string) error {
	t.merges = make(map[uint64]mergeRule, len(merges))
	next := t.n
	id := func(s string) uint32 {
		if i, ok := t.index[s]; ok {
			return i
		}
		t.index[s] = next
		next++
		return next - 1
	}
	for rank, m := range merges {
		if m[0] == "" || m[1] == "" {
			return fmt.Errorf("%w: merge %d (%q, %q) has an empty side", ErrFormat, rank, m[0], m[1])
		}
		key := uint64(id(m[0]))<<32 | uint64(id(m[1]))
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = mergeRule{rank: int32(rank), id: id(m[0] + m[1])}
		}
	}
	return nil
}

func (t *VocabTokenizer) initBytes() {
	for b := range 256 {
		t.byteTok[b] = NoToken
		hex := fmt.Sprintf("<0x%02X>", b)
		switch t.kind {
		case kindSPM:
			if id, ok := t.token(hex); ok {
				t.byteTok[b] = id
			} else if id, ok := t.token(string([]byte{byte(b)})); ok {
				t.byteTok[b] = id
			} else {
				// llama.cpp throws here; SentencePiece emits UNK.
				t.byteTok[b] = t.unk
			}
		case kindBPERaw:
			if id, ok := t.token(hex); ok {
				t.byteTok[b] = id
			}
		case kindBPE:
			if id, ok := t.token(string([]byte{byte(b)})); ok {
				t.byteTok[b] = id
			}
		}
	}
}

// token returns the id of vocabulary token s.
func (t *VocabTokenizer) token(s string) (uint32, bool) {
	id, ok := t.index[s]
	return id, ok && id < t.n
}

// initPieces decodes every token once, as llama.cpp's token_to_piece
// without special: control and unknown tokens decode to nothing,
// user-defined ones to their text, byte tokens to their byte, normal ones
// to their text with U+2581 as space (SentencePiece) or mapped back to
// bytes (byte-level BPE).
func (t *VocabTokenizer) initPieces() {
	t.pieces = make([][]byte, t.n)
	bl := byteLevelMap()
	for i, s := range t.tokens {
		a := t.attrs[i]
		switch {
		case a&(attrControl|attrUnknown) != 0:
		case a&attrUserDefined != 0:
			t.pieces[i] = []byte(s)
		case a&attrNormal != 0:
			if t.kind == kindBPE {
				t.pieces[i] = bl.decode(s)
			} else {
				t.pieces[i] = []byte(strings.ReplaceAll(s, spaceMark, " "))
			}
		case a&attrByte != 0:
			t.pieces[i] = []byte{byteTokenValue(s)}
		}
	}
}

// spaceMark is SentencePiece's visible space, U+2581.
const spaceMark = "\u2581"

// byteTokenValue reads the byte of a <0xXX> token as llama.cpp does
// (strtol of its two characters after "<0x"): as many hex digits as there
// are, 0 for none.
func byteTokenValue(s string) byte {
	var v byte
	for i := 3; i < 5 && i < len(s); i++ {
		d, ok := hexVal(s[i])
		if !ok {
			break
		}
		v = v<<4 | d
	}
	return v
}

// pieceBound is MaxPieceBytes: the most input bytes one token of an
// encoded text stands for, or 0 when some input byte can vanish (no
// fallback token for it) or normalization may shrink the text.
func (t *VocabTokenizer) pieceBound() int {
	if t.nfc {
		return 0
	}
	for b := range 256 {
		if t.byteTok[b] == NoToken && t.kind != kindBPE {
			return 0
		}
	}
	if t.kind == kindBPE {
		// A word falls back to one-byte tokens only when it is no token;
		// with every byte's code point a token and every merge making a
		// token, none does.
		bl := byteLevelMap()
		for b := range 256 {
			if _, ok := t.token(bl.enc[b]); !ok {
				return 0
			}
		}
		for _, r := range t.merges {
			if r.id >= t.n {
				return 0
			}
		}
	}
	m := 1
	for i, s := range t.tokens {
		switch a := t.attrs[i]; {
		case a&attrByte != 0:
		case a&(attrControl|attrUnknown|attrUserDefined) != 0:
			// Matched as its text (UNK also stands for one byte).
			m = max(m, len(s))
		case t.kind == kindBPE:
			// A byte-level token stands for the bytes it decodes to
			// (invalid UTF-8 only grows: each bad byte is U+FFFD).
			m = max(m, len(byteLevelMap().decode(s)))
		default:
			// U+2581 stands for a space or for itself: at most its own
			// three bytes.
			m = max(m, len(s))
		}
	}
	return m
}
