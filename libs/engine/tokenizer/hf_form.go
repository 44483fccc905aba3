package tokenizer

import (
	"fmt"
	"strings"
)

// flatten lists a component and the members of its sequences.
func flatten(c *hfComponent) []hfComponent {
	if c == nil {
		return nil
	}
	if c.Type != "Sequence" {
		return []hfComponent{*c}
	}
	var out []hfComponent
	for _, list := range [][]hfComponent{c.Normalizers, c.PreTokenizers, c.Processors} {
		for i := range list {
			out = append(out, flatten(&list[i])...)
		}
	}
	return out
}

func describe(cs []hfComponent) string {
	if len(cs) == 0 {
		return "none"
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Type
		if c.Pattern.Regex != nil {
			names[i] += fmt.Sprintf("(%q)", *c.Pattern.Regex)
		} else if c.Pattern.String != nil {
			names[i] += fmt.Sprintf("(%q)", *c.Pattern.String)
		}
	}
	return strings.Join(names, ", ")
}

// hfSplitPres are the Split expressions of known pre-tokenizers, as
// tokenizer.json spells them.
var hfSplitPres = map[string]string{
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:        "llama-bpe",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:             "qwen2",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "qwen35",
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`:                                                 "gpt-2",
}

// form decides between byte-level BPE and SentencePiece-as-BPE and sets
// the pre-tokenizer and space handling.
func (tj *hfTokenizer) form(v *Vocab) error {
	norms, pres := flatten(tj.Normalizer), flatten(tj.PreTokenizer)
	for _, p := range pres {
		if p.Type == "ByteLevel" {
			return tj.byteLevel(v, norms, pres)
		}
	}
	return tj.sentencePiece(v, norms, pres)
}

func (tj *hfTokenizer) byteLevel(v *Vocab, norms, pres []hfComponent) error {
	for _, n := range norms {
		if n.Type != "NFC" {
			return fmt.Errorf("%w: tokenizer.json byte-level BPE with normalizer %s", ErrUnsupported, describe(norms))
		}
		v.NFC = true
	}
	useRegex := func(c hfComponent) bool { return c.UseRegex == nil || *c.UseRegex }
	last := pres[len(pres)-1]
	if last.Type != "ByteLevel" || (last.AddPrefixSpace != nil && *last.AddPrefixSpace) {
		return fmt.Errorf("%w: tokenizer.json pre-tokenizer %s (want ByteLevel last, without add_prefix_space)", ErrUnsupported, describe(pres))
	}
	switch {
	case len(pres) == 1 && useRegex(last):
		v.Pre = "gpt-2"
		return nil
	case len(pres) == 2 && pres[0].Type == "Split" && pres[0].Pattern.Regex != nil && pres[0].Behavior == "Isolated" && !pres[0].Invert && !useRegex(last):
		if name, ok := hfSplitPres[*pres[0].Pattern.Regex]; ok {
			v.Pre = name
			return nil
		}
	case len(pres) == 2 && pres[0].Type == "Digits" && pres[0].Individual && useRegex(last):
		v.Pre = "starcoder"
		return nil
	}
	return fmt.Errorf("%w: tokenizer.json pre-tokenizer %s", ErrUnsupported, describe(pres))
}

func (tj *hfTokenizer) sentencePiece(v *Vocab, norms, pres []hfComponent) error {
	if !tj.Model.ByteFallback {
		return fmt.Errorf("%w: tokenizer.json BPE that is neither byte-level (pre-tokenizer %s) nor SentencePiece with byte_fallback", ErrUnsupported, describe(pres))
	}
	v.Model = ModelBPERaw
	replaced := false
	for _, n := range norms {
		switch {
		case n.Type == "Prepend" && n.Prepend == spaceMark:
			v.AddSpacePrefix = true
		case n.Type == "Replace" && n.Pattern.String != nil && *n.Pattern.String == " " && n.Content == spaceMark:
			replaced = true
		default:
			return fmt.Errorf("%w: tokenizer.json SentencePiece BPE with normalizer %s", ErrUnsupported, describe(norms))
		}
	}
	switch {
	case len(pres) == 0 && replaced:
	case len(pres) == 1 && pres[0].Type == "Metaspace" && len(norms) == 0 && pres[0].Replacement == spaceMark && pres[0].Split != nil && !*pres[0].Split:
		m := pres[0]
		switch {
		case m.PrependScheme == "always" || (m.PrependScheme == "" && m.AddPrefixSpace != nil && *m.AddPrefixSpace):
			v.AddSpacePrefix, v.SpacePrefixUnlessSpace = true, true
		case m.PrependScheme == "first":
			v.AddSpacePrefix, v.SpacePrefixUnlessSpace, v.SpacePrefixFirstOnly = true, true, true
		case m.PrependScheme == "never" || m.PrependScheme == "":
		default:
			return fmt.Errorf("%w: tokenizer.json Metaspace prepend_scheme %q", ErrUnsupported, m.PrependScheme)
		}
	default:
		return fmt.Errorf("%w: tokenizer.json SentencePiece BPE with normalizer %s and pre-tokenizer %s (want Replace \" \" -> \"▁\", or Metaspace without split)", ErrUnsupported, describe(norms), describe(pres))
	}
	for i, s := range v.Tokens {
		if v.Types[i] == TokenNormal && hfByteToken.MatchString(s) {
			v.Types[i] = TokenByte
		}
	}
	return nil
}

// looksSpecial is the converter's does_token_look_special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>")) ||
		(strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">"))
}

// specials places the added tokens and finds UNK, BOS and EOS.
func (tj *hfTokenizer) specials(v *Vocab, cfg *hfConfig) error {
	for _, a := range tj.AddedTokens {
		text := a.Content
		if a.Special || looksSpecial(text) {
			v.Types[a.ID] = TokenControl
		} else {
			text = strings.ReplaceAll(text, spaceMark, " ") // the converter pre-normalizes user-defined spaces
			v.Types[a.ID] = TokenUserDefined
		}
		v.Tokens[a.ID] = text
		if a.LStrip {
			v.LStrip = append(v.LStrip, uint32(a.ID))
		}
		if a.RStrip {
			v.RStrip = append(v.RStrip, uint32(a.ID))
		}
	}
	byText := make(map[string]uint32, len(v.Tokens))
	for i := len(v.Tokens) - 1; i >= 0; i-- {
		byText[v.Tokens[i]] = uint32(i)
	}
	find := func(what, s string) (uint32, error) {
		id, ok := byText[s]
		if !ok {
			return NoToken, fmt.Errorf("%w: %s %q is not in the vocabulary", ErrFormat, what, s)
		}
		return id, nil
	}
	var err error
	if u := tj.Model.UnkToken; u != nil && *u != "" {
		if v.UNK, err = find("unk_token", *u); err != nil {
			return err
		}
	}
	// The post-processor's template says what a prompt is wrapped in; the
	// config, when it says, wins.
	for _, p := range flatten(tj.PostProcessor) {
		if p.Type != "TemplateProcessing" || len(p.Single) == 0 {
			continue
		}
		if st := p.Single[0].SpecialToken; st != nil {
			if v.BOS, err = find("post_processor token", st.ID); err != nil {
				return err
			}
			v.AddBOS = true
		}
		if st := p.Single[len(p.Single)-1].SpecialToken; st != nil && len(p.Single) > 1 {
			if v.EOS, err = find("post_processor token", st.ID); err != nil {
				return err
			}
			v.AddEOS = true
		}
	}
	if cfg.BOS.Set && cfg.BOS.Content != "" {
		if v.BOS, err = find("bos_token", cfg.BOS.Content); err != nil {
			return err
		}
	}
	if cfg.EOS.Set && cfg.EOS.Content != "" {
		if v.EOS, err = find("eos_token", cfg.EOS.Content); err != nil {
			return err
		}
	}
	if cfg.AddBOS != nil {
		v.AddBOS = *cfg.AddBOS
	}
	if cfg.AddEOS != nil {
		v.AddEOS = *cfg.AddEOS
	}
	return nil
}
