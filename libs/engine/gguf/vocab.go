package gguf

import (
	"fmt"
	"math"
	"strings"

	"switchyard.dev/libs/engine/tokenizer"
)

// Vocab reads the tokenizer a GGUF file carries (its tokenizer.ggml.*
// entries) the way llama.cpp's llama_vocab::load does: the model's
// defaults for BOS, EOS, UNK and add_bos, the settings implied by the
// pre-tokenizer, out-of-range special ids ignored, and llama.cpp's
// fix-ups of token types by their text (end-of-turn and fill-in-middle
// markers made control tokens, Phi-3's special tokens swallowing the
// whitespace after them, ...), which change how text containing those
// strings tokenizes.
func Vocab(md Metadata) (tokenizer.Vocab, error) {
	r := vocabReader{md: md}
	v, err := r.read()
	if err != nil {
		return tokenizer.Vocab{}, fmt.Errorf("gguf: tokenizer: %w", err)
	}
	return v, nil
}

type vocabReader struct {
	md Metadata
}

func (r vocabReader) str(key string) (string, bool, error) {
	v, ok := r.md.Get(key)
	if !ok {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, fmt.Errorf("%w: %s is a %T, want a string", ErrFormat, key, v)
	}
	return s, true, nil
}

func (r vocabReader) boolean(key string, def bool) (bool, error) {
	v, ok := r.md.Get(key)
	if !ok {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return def, fmt.Errorf("%w: %s is a %T, want a bool", ErrFormat, key, v)
	}
	return b, nil
}

// id reads an integer key as a token id; ok is false when it is absent.
func (r vocabReader) id(key string) (uint64, bool, error) {
	v, ok := r.md.Get(key)
	if !ok {
		return 0, false, nil
	}
	switch x := v.(type) {
	case uint8:
		return uint64(x), true, nil
	case uint16:
		return uint64(x), true, nil
	case uint32:
		return uint64(x), true, nil
	case uint64:
		return x, true, nil
	case int8, int16, int32, int64:
		n := asInt64(x)
		if n < 0 {
			return math.MaxUint64, true, nil // out of range, like any bad id
		}
		return uint64(n), true, nil
	}
	return 0, false, fmt.Errorf("%w: %s is a %T, want an integer", ErrFormat, key, v)
}

func asInt64(v any) int64 {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	}
	return 0
}

func (r vocabReader) read() (tokenizer.Vocab, error) {
	var v tokenizer.Vocab
	model, ok, err := r.str("tokenizer.ggml.model")
	switch {
	case err != nil:
		return v, err
	case !ok:
		return v, fmt.Errorf("%w: no tokenizer.ggml.model", ErrFormat)
	}
	pre, _, err := r.str("tokenizer.ggml.pre")
	if err != nil {
		return v, err
	}
	tokens, err := r.tokens()
	if err != nil {
		return v, err
	}
	n := uint64(len(tokens))
	v.Tokens = tokens
	bos, eos, unk := uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(math.MaxUint64)
	switch model {
	case tokenizer.ModelSPM:
		v.Model, v.Pre = tokenizer.ModelSPM, ""
		bos, eos, unk = 1, 2, 0
		v.AddBOS = true
		// Only SentencePiece honours add_space_prefix in llama.cpp; BPE
		// files that carry it are tokenized without.
		if v.AddSpacePrefix, err = r.boolean("tokenizer.ggml.add_space_prefix", true); err != nil {
			return v, err
		}
	case tokenizer.ModelBPE, tokenizer.ModelBPERaw:
		v.Model = model
		if model == tokenizer.ModelBPE {
			bos, eos = 11, 11
		} else {
			pre = "gemma4"
		}
		if pre == "" {
			pre = "default"
		}
		v.Pre = pre
		preDefaults(&v, &bos)
		if v.Merges, err = r.merges(); err != nil {
			return v, err
		}
	default:
		return v, fmt.Errorf("%w: tokenizer model %q (GGUF tokenizer.ggml.model; supported: %q, %q, %q)", tokenizer.ErrUnsupported, model, tokenizer.ModelSPM, tokenizer.ModelBPE, tokenizer.ModelBPERaw)
	}
	if v.Scores, err = r.scores(len(tokens)); err != nil {
		return v, err
	}
	if v.Types, err = r.types(len(tokens)); err != nil {
		return v, err
	}
	for _, s := range []struct {
		key string
		id  *uint64
	}{{"tokenizer.ggml.bos_token_id", &bos}, {"tokenizer.ggml.eos_token_id", &eos}, {"tokenizer.ggml.unknown_token_id", &unk}} {
		if *s.id >= n {
			*s.id = math.MaxUint64 // a default past the vocabulary is disabled
		}
		got, ok, err := r.id(s.key)
		if err != nil {
			return v, err
		}
		if ok && got < n {
			*s.id = got // a bad id keeps the default, as llama.cpp does
		}
	}
	v.BOS, v.EOS, v.UNK = tokenID(bos), tokenID(eos), tokenID(unk)
	if v.AddBOS, err = r.boolean("tokenizer.ggml.add_bos_token", v.AddBOS); err != nil {
		return v, err
	}
	if v.AddEOS, err = r.boolean("tokenizer.ggml.add_eos_token", v.AddEOS); err != nil {
		return v, err
	}
	if v.Pre == "gemma4" {
		v.AddBOS = true // llama.cpp overrides it for Gemma 4
	}
	if err := r.fixTypes(&v); err != nil {
		return v, err
	}
	return v, nil
}

func tokenID(id uint64) uint32 {
	if id >= math.MaxUint32 {
		return tokenizer.NoToken
	}
	return uint32(id)
}

// preDefaults applies what llama.cpp derives from a BPE pre-tokenizer's
// name besides its expressions.
func preDefaults(v *tokenizer.Vocab, bos *uint64) {
	switch v.Pre {
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano":
		v.IgnoreMerges, v.AddBOS = true, true
	case "tekken":
		v.IgnoreMerges, v.AddBOS = true, true
	case "youtu", "minicpm5", "granite-embed-multi-97m":
		v.IgnoreMerges = true
	case "chameleon":
		v.AddBOS = true
	case "glm4", "chatglm-bpe":
		*bos = math.MaxUint64
	}
}

func (r vocabReader) tokens() ([]string, error) {
	v, ok := r.md.Get("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("%w: no tokenizer.ggml.tokens", ErrFormat)
	}
	toks, ok := v.([]string)
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens is a %T, want an array of strings", ErrFormat, v)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens is empty", ErrFormat)
	}
	out := make([]string, len(toks))
	for i, s := range toks {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i) // llama.cpp's name for it
		}
		out[i] = s
	}
	return out, nil
}

func (r vocabReader) scores(n int) ([]float32, error) {
	v, ok := r.md.Get("tokenizer.ggml.scores")
	if !ok {
		return nil, nil
	}
	var out []float32
	switch s := v.(type) {
	case []float32:
		out = s
	case []int32:
		out = make([]float32, len(s))
		for i, x := range s {
			out[i] = float32(x)
		}
	default:
		return nil, fmt.Errorf("%w: tokenizer.ggml.scores is a %T, want float32 or int32 array", ErrFormat, v)
	}
	if len(out) < n {
		return nil, fmt.Errorf("%w: %d tokenizer.ggml.scores for %d tokens", ErrFormat, len(out), n)
	}
	return out[:n], nil
}

func (r vocabReader) types(n int) ([]tokenizer.TokenType, error) {
	v, ok := r.md.Get("tokenizer.ggml.token_type")
	if !ok {
		return nil, nil
	}
	s, ok := v.([]int32)
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.token_type is a %T, want an int32 array", ErrFormat, v)
	}
	if len(s) < n {
		return nil, fmt.Errorf("%w: %d tokenizer.ggml.token_type for %d tokens", ErrFormat, len(s), n)
	}
	out := make([]tokenizer.TokenType, n)
	for i := range out {
		out[i] = tokenizer.TokenType(s[i])
		if out[i] < tokenizer.TokenUndefined || out[i] > tokenizer.TokenByte {
			out[i] = tokenizer.TokenUndefined
		}
	}
	return out, nil
}

// merges reads "left right" strings, split at the first space after the
// first byte, as llama.cpp does; a merge without one can never apply.
func (r vocabReader) merges() ([][2]string, error) {
	v, ok := r.md.Get("tokenizer.ggml.merges")
	if !ok {
		return nil, fmt.Errorf("%w: no tokenizer.ggml.merges for a BPE tokenizer", ErrFormat)
	}
	s, ok := v.([]string)
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.merges is a %T, want an array of strings", ErrFormat, v)
	}
	out := make([][2]string, 0, len(s))
	for _, m := range s {
		if len(m) < 2 {
			continue
		}
		i := strings.IndexByte(m[1:], ' ') + 1
		if i == 0 || i == len(m)-1 {
			continue
		}
		out = append(out, [2]string{m[:i], m[i+1:]})
	}
	return out, nil
}
