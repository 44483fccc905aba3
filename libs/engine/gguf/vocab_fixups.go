package gguf

import (
	"strings"

	"switchyard.dev/libs/engine/tokenizer"
)

// llama.cpp does not trust the token types converters write: at load it
// finds end-of-turn, end-of-generation and fill-in-middle markers by their
// text and makes them control tokens, and sets per-model strip flags. The
// lists below are its lists; a marker's type decides whether a prompt that
// spells it gets the marker or its text, so the frontend must agree.

// autoMarkers are the texts llama.cpp searches for a role (EOT, FIM
// prefix, ...) whose id the file does not give; the first found becomes a
// control token. (llama.cpp takes the first in hash order; in the rare
// vocabulary with several, this takes the lowest id.)
var autoMarkers = []struct {
	keys  []string
	texts []string
}{
	{[]string{"tokenizer.ggml.eot_token_id"}, []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
	{[]string{"tokenizer.ggml.eom_token_id"}, []string{"<|eom_id|>"}},
	{[]string{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"}, []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
	{[]string{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"}, []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
	{[]string{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"}, []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}},
	{[]string{"tokenizer.ggml.fim_pad_token_id"}, []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
	{[]string{"tokenizer.ggml.fim_rep_token_id"}, []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
	{[]string{"tokenizer.ggml.fim_sep_token_id"}, []string{"<|file_sep|>"}},
}

// eogTexts end generation; llama.cpp makes every one present a control
// token.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
	"<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
	"<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
}

// alwaysRendered are gpt-oss markers llama.cpp makes user-defined so they
// show in output.
var alwaysRendered = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}

func (r vocabReader) fixTypes(v *tokenizer.Vocab) error {
	n := len(v.Tokens)
	if v.Types == nil {
		v.Types = make([]tokenizer.TokenType, n)
		for i := range v.Types {
			v.Types[i] = tokenizer.TokenNormal
		}
	}
	byText := make(map[string]int, n) // the last of equal texts, as llama.cpp's map
	for i, s := range v.Tokens {
		byText[s] = i
	}
	has := func(s string) (int, bool) {
		i, ok := byText[s]
		return i, ok
	}
	for _, m := range autoMarkers {
		set := false
		for _, k := range m.keys {
			id, ok, err := r.id(k)
			if err != nil {
				return err
			}
			set = set || (ok && id < uint64(n))
		}
		if set {
			continue
		}
		best := -1
		for _, s := range m.texts {
			if i, ok := has(s); ok && (best < 0 || i < best) {
				best = i
			}
		}
		if best >= 0 {
			v.Types[best] = tokenizer.TokenControl
		}
	}
	for _, s := range eogTexts {
		if i, ok := has(s); ok {
			v.Types[i] = tokenizer.TokenControl
		}
	}
	for _, s := range alwaysRendered {
		if i, ok := has(s); ok {
			v.Types[i] = tokenizer.TokenUserDefined
		}
	}
	// Harmony (<|return|>, <|call|>) and Solar Open (<|calls|>,
	// <|flush|>) end a turn with <|end|> but generation with the others:
	// there <|end|> is rendered text.
	_, ret := has("<|return|>")
	_, call := has("<|call|>")
	_, calls := has("<|calls|>")
	_, flush := has("<|flush|>")
	if end, ok := has("<|end|>"); ok && ((ret && (call || calls)) || ((call || calls) && flush)) {
		v.Types[end] = tokenizer.TokenUserDefined
	}
	// Gemma 4 and PaddleOCR use </s> as ordinary text.
	if _, ok := has("<|tool_response>"); ok {
		if s, ok := has("</s>"); ok {
			v.Types[s] = tokenizer.TokenNormal
		}
	}
	return r.fixStrip(v, has)
}

// fixStrip sets the strip flags llama.cpp sets by model name.
func (r vocabReader) fixStrip(v *tokenizer.Vocab, has func(string) (int, bool)) error {
	name, _, err := r.str("general.name")
	if err != nil {
		return err
	}
	pre, _, err := r.str("tokenizer.ggml.pre")
	if err != nil {
		return err
	}
	arch, _, err := r.str("general.architecture")
	if err != nil {
		return err
	}
	name = strings.ToLower(name)
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case containsAny(pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		if i, ok := has("<mask>"); ok {
			v.LStrip = append(v.LStrip, uint32(i))
		}
	case containsAny(name, "phi-3", "phi3"):
		// Every special token swallows the whitespace after it, but
		// <unk>, <s> and <|endoftext|>.
		keep := map[int]bool{}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if i, ok := has(s); ok {
				keep[i] = true
			}
		}
		for i, t := range v.Types {
			special := t == tokenizer.TokenControl || t == tokenizer.TokenUserDefined || t == tokenizer.TokenUnknown
			if (special || v.Tokens[i] == "</s>") && !keep[i] {
				v.RStrip = append(v.RStrip, uint32(i))
			}
		}
	case containsAny(name, "modern-bert"):
		if i, ok := has("[MASK]"); ok {
			v.LStrip = append(v.LStrip, uint32(i))
		}
	}
	return nil
}
