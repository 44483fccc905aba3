package catalog

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/chattmpl"
)

// vocabInfo is a worker's model info with a small byte-level BPE
// vocabulary: bytes as GPT-2's unicode pieces, "<s>" a control token.
func vocabInfo(t *testing.T, addBOS bool, template string) *workerv1.GetModelInfoResponse {
	t.Helper()
	v := tokenizer.Vocab{Model: tokenizer.ModelBPE, Pre: "gpt-2", BOS: 0, EOS: 0, UNK: tokenizer.NoToken, AddBOS: addBOS}
	v.Tokens = append(v.Tokens, "<s>")
	v.Types = append(v.Types, tokenizer.TokenControl)
	for _, r := range "abcdefghijklmnopqrstuvwxyz:Ġ" {
		v.Tokens = append(v.Tokens, string(r))
		v.Types = append(v.Types, tokenizer.TokenNormal)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &workerv1.GetModelInfoResponse{Model: "m", VocabSize: uint32(len(v.Tokens)), ContextLength: 64, BosTokenId: 0, EosTokenId: 0,
		TokenizerKind: "vocab", Tokenizer: data, ChatTemplate: template}
}

// A "vocab" tokenizer reads special tokens in the text and starts with
// BOS once, whether the text named it or not.
func TestVocabEncode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addBOS bool
		text   string
		want   []uint32
	}{
		{true, "ab", []uint32{0, 1, 2}},
		{true, "<s>ab", []uint32{0, 1, 2}},
		{false, "ab", []uint32{1, 2}},
		{false, "a<s>b", []uint32{1, 0, 2}},
	} {
		info := vocabInfo(t, tc.addBOS, "")
		tok, err := Tokenizer(info)
		if err != nil {
			t.Fatal(err)
		}
		m := &Model{Name: "m", Info: info, Tok: tok}
		if got := m.Encode(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("add_bos %v, %q: %v; want %v", tc.addBOS, tc.text, got, tc.want)
		}
	}
	bad := vocabInfo(t, true, "")
	bad.VocabSize++
	if _, err := Tokenizer(bad); err == nil || !strings.Contains(err.Error(), "tokens") {
		t.Errorf("a vocabulary of another size: err = %v", err)
	}
	bad.Tokenizer = []byte("{")
	if _, err := Tokenizer(bad); err == nil {
		t.Error("a vocabulary that is not JSON: no error")
	}
}

// A model's own template renders with its BOS text; one that does not
// compile fails every render with a message naming the fix.
func TestModelTemplate(t *testing.T) {
	t.Parallel()
	info := vocabInfo(t, true, "")
	tok, err := Tokenizer(info)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	tmpl := modelTemplate(context.Background(), log, "m", "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", tok)
	conv := chattmpl.Conversation{Messages: []chattmpl.Message{{Role: "user", Content: "ab"}}}
	if got, err := tmpl(conv); err != nil || got != "<s>ab" {
		t.Errorf("render = %q, %v; want <s>ab", got, err)
	}
	broken := modelTemplate(context.Background(), log, "m", "{% for %}", tok)
	if _, err := broken(conv); err == nil || !strings.Contains(err.Error(), "-chat-template m=FILE") {
		t.Errorf("a template that does not compile: err = %v", err)
	}
}
