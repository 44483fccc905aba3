package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// ParseHFJSON builds a tokenizer from a Hugging Face tokenizer.json and,
// when not nil, the model's tokenizer_config.json (for bos_token,
// eos_token, add_bos_token, add_eos_token).
func ParseHFJSON(tokenizerJSON, configJSON []byte) (*VocabTokenizer, error) {
	v, err := HFVocab(tokenizerJSON, configJSON)
	if err != nil {
		return nil, err
	}
	return NewVocab(v)
}

// HFVocab reads a tokenizer.json into a Vocab, as llama.cpp's converter
// would write the model's GGUF vocabulary. Two forms of model.type "BPE"
// are understood:
//
//   - byte-level BPE: a ByteLevel pre-tokenizer, alone (GPT-2's
//     expression) or after a Split by a known expression (llama 3, Qwen 2,
//     Qwen 3.5) or Digits (StarCoder); normalizer none or NFC.
//   - SentencePiece as BPE: byte_fallback, spaces made U+2581 by a
//     Replace normalizer (with Prepend "▁" for the dummy prefix) or by a
//     Metaspace pre-tokenizer with split false.
//
// Added tokens become control tokens when special (or when they look
// special, as the converter judges: <|...|> and the like), user-defined
// ones otherwise, with their lstrip and rstrip. Anything else is an error
// wrapping ErrUnsupported that names what it met.
func HFVocab(tokenizerJSON, configJSON []byte) (Vocab, error) {
	var tj hfTokenizer
	if err := json.Unmarshal(tokenizerJSON, &tj); err != nil {
		return Vocab{}, fmt.Errorf("%w: tokenizer.json: %w", ErrFormat, err)
	}
	var cfg hfConfig
	if len(configJSON) > 0 {
		if err := json.Unmarshal(configJSON, &cfg); err != nil {
			return Vocab{}, fmt.Errorf("%w: tokenizer_config.json: %w", ErrFormat, err)
		}
	}
	v, err := tj.vocab()
	if err != nil {
		return Vocab{}, err
	}
	if err := tj.form(&v); err != nil {
		return Vocab{}, err
	}
	if err := tj.specials(&v, &cfg); err != nil {
		return Vocab{}, err
	}
	return v, nil
}

type hfTokenizer struct {
	AddedTokens   []hfAddedToken `json:"added_tokens"`
	Normalizer    *hfComponent   `json:"normalizer"`
	PreTokenizer  *hfComponent   `json:"pre_tokenizer"`
	PostProcessor *hfComponent   `json:"post_processor"`
	Model         hfModel        `json:"model"`
}

type hfAddedToken struct {
	ID      int64  `json:"id"`
	Content string `json:"content"`
	LStrip  bool   `json:"lstrip"`
	RStrip  bool   `json:"rstrip"`
	Special bool   `json:"special"`
}

type hfModel struct {
	Type                    string            `json:"type"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]int64  `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

// hfComponent is any normalizer, pre-tokenizer or post-processor; only
// the fields of the kinds understood are read.
type hfComponent struct {
	Type           string        `json:"type"`
	Normalizers    []hfComponent `json:"normalizers"`
	PreTokenizers  []hfComponent `json:"pretokenizers"`
	Processors     []hfComponent `json:"processors"`
	Prepend        string        `json:"prepend"`
	Pattern        hfPattern     `json:"pattern"`
	Content        string        `json:"content"`
	Behavior       string        `json:"behavior"`
	Invert         bool          `json:"invert"`
	AddPrefixSpace *bool         `json:"add_prefix_space"`
	UseRegex       *bool         `json:"use_regex"`
	Individual     bool          `json:"individual_digits"`
	Replacement    string        `json:"replacement"`
	PrependScheme  string        `json:"prepend_scheme"`
	Split          *bool         `json:"split"`
	Single         []hfTemplate  `json:"single"`
}

type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type hfTemplate struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// hfConfig is the part of tokenizer_config.json read.
type hfConfig struct {
	BOS    hfTokenName `json:"bos_token"`
	EOS    hfTokenName `json:"eos_token"`
	AddBOS *bool       `json:"add_bos_token"`
	AddEOS *bool       `json:"add_eos_token"`
}

// hfTokenName is a token given as a string or as {"content": ...}.
type hfTokenName struct {
	Set     bool
	Content string
}

func (n *hfTokenName) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		n.Set, n.Content = true, s
		return nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("token name: %w", err)
	}
	n.Set, n.Content = true, o.Content
	return nil
}

// maxHFHoles bounds the ids a tokenizer.json may leave unassigned, so a
// stray huge id is an error, not a vocabulary of that size.
const maxHFHoles = 1 << 16

var hfByteToken = regexp.MustCompile(`^<0x[0-9A-Fa-f]{2}>$`)

// vocab assembles tokens and types from model.vocab and added_tokens.
func (tj *hfTokenizer) vocab() (Vocab, error) {
	m := &tj.Model
	switch {
	case m.Type != "BPE":
		return Vocab{}, fmt.Errorf("%w: tokenizer.json model type %q (only \"BPE\")", ErrUnsupported, m.Type)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return Vocab{}, fmt.Errorf("%w: tokenizer.json BPE with continuing_subword_prefix %q", ErrUnsupported, *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return Vocab{}, fmt.Errorf("%w: tokenizer.json BPE with end_of_word_suffix %q", ErrUnsupported, *m.EndOfWordSuffix)
	}
	size := int64(0)
	for s, id := range m.Vocab {
		if id < 0 || id >= 1<<30 {
			return Vocab{}, fmt.Errorf("%w: tokenizer.json vocab %q has id %d", ErrFormat, s, id)
		}
		size = max(size, id+1)
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.ID >= 1<<30 || a.Content == "" {
			return Vocab{}, fmt.Errorf("%w: tokenizer.json added token %q with id %d", ErrFormat, a.Content, a.ID)
		}
		size = max(size, a.ID+1)
	}
	if size == 0 {
		return Vocab{}, fmt.Errorf("%w: tokenizer.json has no vocabulary", ErrFormat)
	}
	if size-int64(len(m.Vocab)) > maxHFHoles+int64(len(tj.AddedTokens)) {
		return Vocab{}, fmt.Errorf("%w: tokenizer.json ids reach %d for %d tokens", ErrFormat, size-1, len(m.Vocab)+len(tj.AddedTokens))
	}
	v := Vocab{
		Model:        ModelBPE,
		Tokens:       make([]string, size),
		Types:        make([]TokenType, size),
		BOS:          NoToken,
		EOS:          NoToken,
		UNK:          NoToken,
		IgnoreMerges: m.IgnoreMerges,
	}
	for s, id := range m.Vocab {
		v.Tokens[id], v.Types[id] = s, TokenNormal
	}
	for i, s := range v.Tokens {
		if s == "" {
			v.Tokens[i], v.Types[i] = fmt.Sprintf("[PAD%d]", i), TokenUnused // the converter's filler
		}
	}
	merges, err := tj.merges()
	if err != nil {
		return Vocab{}, err
	}
	v.Merges = merges
	return v, nil
}

// merges reads model.merges in either form: "left right" or
// ["left", "right"].
func (tj *hfTokenizer) merges() ([][2]string, error) {
	out := make([][2]string, 0, len(tj.Model.Merges))
	for i, raw := range tj.Model.Merges {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			parts := strings.Split(s, " ")
			if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
				return nil, fmt.Errorf("%w: tokenizer.json merge %d %q is not two tokens", ErrFormat, i, s)
			}
			out = append(out, [2]string{parts[0], parts[1]})
			continue
		}
		var pair []string
		if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 || pair[0] == "" || pair[1] == "" {
			return nil, fmt.Errorf("%w: tokenizer.json merge %d is %.40s, want \"a b\" or [\"a\", \"b\"]", ErrFormat, i, raw)
		}
		out = append(out, [2]string{pair[0], pair[1]})
	}
	return out, nil
}
