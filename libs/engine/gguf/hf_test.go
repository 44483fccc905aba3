package gguf

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/tokenizer"
)

// hfPreTokenizers are the tokenizer.json pre-tokenizers of the models
// behind llama.cpp's vocabularies, as the models publish them.
var hfPreTokenizers = map[string]any{
	"gpt-2":     map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
	"llama-bpe": split(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	"qwen2":     split(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	"qwen35":    split(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	"starcoder": map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Digits", "individual_digits": true},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
	}},
}

func split(re string) any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": re}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	}}
}

// hfJSON writes v as Hugging Face would publish that model: tokenizer.json
// (byte-level BPE, or SentencePiece as BPE with merges made from the
// scores as transformers' converter makes them) and tokenizer_config.json.
func hfJSON(t *testing.T, v tokenizer.Vocab, pairMerges bool) (tokJSON, cfgJSON []byte) {
	t.Helper()
	vocab := map[string]int{}
	var added []any
	strip := func(ids []uint32, id int) bool { return slices.Contains(ids, uint32(id)) }
	for i, s := range v.Tokens {
		switch v.Types[i] {
		case tokenizer.TokenUnused:
			continue // the converter's [PAD] fillers are holes in tokenizer.json
		case tokenizer.TokenControl, tokenizer.TokenUserDefined, tokenizer.TokenUnknown:
			added = append(added, map[string]any{
				"id": i, "content": s, "single_word": false, "normalized": false,
				"lstrip": strip(v.LStrip, i), "rstrip": strip(v.RStrip, i),
				"special": v.Types[i] != tokenizer.TokenUserDefined,
			})
			if v.Model == tokenizer.ModelBPE {
				continue
			}
		}
		vocab[s] = i
	}
	model := map[string]any{"type": "BPE", "vocab": vocab, "ignore_merges": v.IgnoreMerges, "byte_fallback": false}
	doc := map[string]any{"version": "1.0", "added_tokens": added, "model": model, "normalizer": nil, "pre_tokenizer": nil}
	merges := v.Merges
	switch v.Model {
	case tokenizer.ModelBPE:
		pre, ok := hfPreTokenizers[v.Pre]
		if !ok {
			pre = hfPreTokenizers["starcoder"]
		}
		doc["pre_tokenizer"] = pre
		doc["decoder"] = map[string]any{"type": "ByteLevel"}
		if v.Pre == "qwen2" {
			doc["normalizer"] = map[string]any{"type": "NFC"}
		}
	case tokenizer.ModelSPM:
		model["byte_fallback"], model["fuse_unk"], model["unk_token"] = true, true, v.Tokens[v.UNK]
		doc["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}}
		merges = spmMerges(v)
	}
	var ms []any
	for _, m := range merges {
		if pairMerges {
			ms = append(ms, []string{m[0], m[1]})
		} else {
			ms = append(ms, m[0]+" "+m[1])
		}
	}
	model["merges"] = ms
	cfg := map[string]any{"add_bos_token": v.AddBOS, "add_eos_token": v.AddEOS}
	if v.BOS != tokenizer.NoToken {
		cfg["bos_token"] = map[string]any{"content": v.Tokens[v.BOS]}
	}
	if v.EOS != tokenizer.NoToken {
		cfg["eos_token"] = v.Tokens[v.EOS]
	}
	tokJSON, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON, err = json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tokJSON, cfgJSON
}

// spmMerges makes BPE merges from SentencePiece scores as transformers'
// SentencePieceExtractor does: every split of every piece into two
// pieces, ordered by the piece's score, then by the halves' ids.
func spmMerges(v tokenizer.Vocab) [][2]string {
	ids := map[string]int{}
	for i, s := range v.Tokens {
		if _, ok := ids[s]; !ok {
			ids[s] = i
		}
	}
	type merge struct {
		l, r  string
		score float32
	}
	var all []merge
	for i, piece := range v.Tokens {
		var local []merge
		for j := range piece {
			if j == 0 {
				continue
			}
			l, r := piece[:j], piece[j:]
			if _, ok := ids[l]; !ok {
				continue
			}
			if _, ok := ids[r]; !ok {
				continue
			}
			local = append(local, merge{l, r, v.Scores[i]})
		}
		slices.SortFunc(local, func(a, b merge) int {
			if ids[a.l] != ids[b.l] {
				return ids[a.l] - ids[b.l]
			}
			return ids[a.r] - ids[b.r]
		})
		all = append(all, local...)
	}
	slices.SortStableFunc(all, func(a, b merge) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	out := make([][2]string, len(all))
	for i, m := range all {
		out[i] = [2]string{m.l, m.r}
	}
	return out
}

// TestHFJSONFromGGUFVectors writes each vocabulary as the model's
// tokenizer.json and checks that ParseHFJSON tokenizes llama.cpp's
// vectors to the same ids.
func TestHFJSONFromGGUFVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		pairs bool
	}{
		{"llama-spm", false}, {"phi-3", false}, {"llama-bpe", true}, {"gpt-2", false},
		{"qwen2", false}, {"qwen35", true}, {"starcoder", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := vocabPath(t, tc.name)
			v := loadVocab(t, path)
			tj, cfg := hfJSON(t, v, tc.pairs)
			tok, err := tokenizer.ParseHFJSON(tj, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tok.BOS() != v.BOS || tok.EOS() != v.EOS || tok.AddBOS() != (v.AddBOS && v.BOS != tokenizer.NoToken) {
				t.Errorf("BOS %d EOS %d AddBOS %v, GGUF %d %d %v", tok.BOS(), tok.EOS(), tok.AddBOS(), v.BOS, v.EOS, v.AddBOS)
			}
			checkVectors(t, tok, readVectors(t, path))
			if strings.HasPrefix(tc.name, "qwen") {
				// Chat markers: control tokens only when asked.
				want := []uint32{151644, 872, 198, 6023, 151645}
				if got := tok.EncodeSpecial("<|im_start|>user\nhi<|im_end|>", false, false); !slices.Equal(got, want) {
					t.Errorf("EncodeSpecial = %v, want %v", got, want)
				}
			}
		})
	}
}
