package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// hfByteLevel is a small GPT-2-style tokenizer.json, written by hand.
const hfByteLevel = `{
  "version": "1.0",
  "added_tokens": [
    {"id": 12, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 13, "content": "<tool>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "",
    "fuse_unk": false, "byte_fallback": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "Ġh": 5, "he": 6, "ll": 7, "Ġhe": 8, "hell": 9, "hello": 10, "Ġhello": 11, "<|endoftext|>": 12},
    "merges": ["Ġ h", "h e", "l l", "Ġh e", "he ll", "hell o", ["Ġhe", "ll"], "Ġhell o"]
  }
}`

// hfSentencePiece is a small Llama-style tokenizer.json: Metaspace
// with prepend_scheme "first", byte fallback.
const hfSentencePiece = `{
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
  "decoder": {"type": "Sequence", "decoders": []},
  "model": {
    "type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "▁": 4, "h": 5, "i": 6, "▁h": 7, "▁hi": 8},
    "merges": ["▁ h", "▁h i"]
  }
}`

func hfTok(t *testing.T, tj, cfg string) *VocabTokenizer {
	t.Helper()
	var c []byte
	if cfg != "" {
		c = []byte(cfg)
	}
	tok, err := ParseHFJSON([]byte(tj), c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestParseHFJSONByteLevel(t *testing.T) {
	t.Parallel()
	tok := hfTok(t, hfByteLevel, `{"bos_token": "<|endoftext|>", "eos_token": {"content": "<|endoftext|>"}}`)
	if got, want := tok.Encode("hello hello", false, false), []uint32{10, 11}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if got, want := tok.EncodeSpecial("hello<|endoftext|><tool>", true, false), []uint32{12, 10, 12, 13}; !slices.Equal(got, want) {
		t.Errorf("EncodeSpecial = %v, want %v", got, want)
	}
	if got := string(Decode(tok, tok.BOS(), []uint32{10, 11, 12, 13})); got != "hello hello<tool>" {
		t.Errorf("Decode = %q", got)
	}
	if tok.BOS() != 12 || tok.EOS() != 12 || tok.AddBOS() {
		t.Errorf("BOS %d EOS %d AddBOS %v", tok.BOS(), tok.EOS(), tok.AddBOS())
	}
	if tok.MaxPieceBytes() != 0 {
		t.Errorf("MaxPieceBytes %d with bytes that have no token", tok.MaxPieceBytes())
	}
}

func TestParseHFJSONSentencePiece(t *testing.T) {
	t.Parallel()
	tok := hfTok(t, hfSentencePiece, "")
	tests := []struct {
		text    string
		special bool
		want    []uint32
	}{
		{"hi\n", false, []uint32{8, 3}},
		{" hi", false, []uint32{8}},        // Metaspace: no second ▁ before a space
		{"hi hi", false, []uint32{8, 8}},   // ▁ for the space
		{"<s>hi", true, []uint32{1, 5, 6}}, // "first": only the start of the text
		{"hi</s>hi", true, []uint32{8, 2, 5, 6}},
	}
	for _, tc := range tests {
		got := tok.Encode(tc.text, false, false)
		if tc.special {
			got = tok.EncodeSpecial(tc.text, false, false)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("encode %q = %v, want %v", tc.text, got, tc.want)
		}
	}
	if tok.BOS() != 1 || !tok.AddBOS() || tok.EOS() != NoToken {
		t.Errorf("BOS %d AddBOS %v EOS %d, want the template's <s>", tok.BOS(), tok.AddBOS(), tok.EOS())
	}
	if got := string(Decode(tok, tok.BOS(), []uint32{8, 3, 8})); got != "hi\n hi" {
		t.Errorf("Decode = %q", got)
	}
}

func TestParseHFJSONErrors(t *testing.T) {
	t.Parallel()
	edit := func(from, to string) string { return strings.Replace(hfByteLevel, from, to, 1) }
	spm := func(from, to string) string { return strings.Replace(hfSentencePiece, from, to, 1) }
	tests := []struct {
		name, tj, cfg string
		target        error
		mention       string
	}{
		{"not JSON", `{"model": `, "", ErrFormat, "tokenizer.json"},
		{"config not JSON", hfByteLevel, `{`, ErrFormat, "tokenizer_config.json"},
		{"Unigram", edit(`"type": "BPE"`, `"type": "Unigram"`), "", ErrUnsupported, `"Unigram"`},
		{"WordPiece", edit(`"type": "BPE"`, `"type": "WordPiece"`), "", ErrUnsupported, `"WordPiece"`},
		{"subword prefix", edit(`"continuing_subword_prefix": ""`, `"continuing_subword_prefix": "##"`), "", ErrUnsupported, "continuing_subword_prefix"},
		{"unknown split", edit(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`,
			`{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Isolated"}, {"type": "ByteLevel", "use_regex": false}]}`), "", ErrUnsupported, `\\d+`},
		{"prefix space", edit(`"add_prefix_space": false`, `"add_prefix_space": true`), "", ErrUnsupported, "add_prefix_space"},
		{"lowercase", edit(`"normalizer": null`, `"normalizer": {"type": "Lowercase"}`), "", ErrUnsupported, "Lowercase"},
		{"bad merge", edit(`"Ġ h"`, `"Ġ h x"`), "", ErrFormat, "merge 0"},
		{"bad merge pair", edit(`["Ġhe", "ll"]`, `["Ġhe"]`), "", ErrFormat, "merge 6"},
		{"huge id", edit(`"Ġhello": 11`, `"Ġhello": 9000000`), "", ErrFormat, "9000000"},
		{"negative id", edit(`"Ġhello": 11`, `"Ġhello": -1`), "", ErrFormat, "-1"},
		{"unknown bos", hfByteLevel, `{"bos_token": "<bos>"}`, ErrFormat, "<bos>"},
		{"no byte fallback", spm(`"byte_fallback": true`, `"byte_fallback": false`), "", ErrUnsupported, "byte_fallback"},
		{"split metaspace", spm(`"split": false`, `"split": true`), "", ErrUnsupported, "Metaspace"},
		{"empty", `{"model": {"type": "BPE", "vocab": {}, "merges": []}}`, "", ErrFormat, "no vocabulary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cfg []byte
			if tc.cfg != "" {
				cfg = []byte(tc.cfg)
			}
			_, err := ParseHFJSON([]byte(tc.tj), cfg)
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("err = %v, want %v mentioning %q", err, tc.target, tc.mention)
			}
		})
	}
}

func FuzzParseHFJSON(f *testing.F) {
	f.Add([]byte(hfByteLevel), []byte(`{"bos_token": "<|endoftext|>"}`))
	f.Add([]byte(hfSentencePiece), []byte(nil))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "a"]]}, "pre_tokenizer": {"type": "ByteLevel"}}`), []byte(`{"add_bos_token": true}`))
	f.Fuzz(func(t *testing.T, tj, cfg []byte) {
		tok, err := ParseHFJSON(tj, cfg)
		if err != nil {
			return
		}
		for _, s := range []string{"hello hi\n", "<s><|endoftext|> é", string(tj[:min(len(tj), 64)])} {
			Decode(tok, tok.BOS(), tok.Encode(s, true, true))
			Decode(tok, tok.BOS(), tok.EncodeSpecial(s, true, true))
		}
	})
}
