package worker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/gguf"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/sharedtest"
)

// A GGUF file's vocabulary ships to frontends as a tokenizer.Vocab that
// tokenizes as the worker does: for stories260K converted from llama2.c,
// exactly as llama2.c's own tokenizer, and with the file's chat template.
func TestReadTokenizerFileGGUF(t *testing.T) {
	t.Parallel()
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	ckpt, tokPath := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	model := filepath.Join(t.TempDir(), "stories260K.gguf")
	if err := gguf.ConvertFiles(model, ckpt, tokPath, "stories260K"); err != nil {
		t.Fatal(err)
	}
	ref, err := tokenizer.LoadBPEFile(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}

	tf, err := readTokenizerFile(model)
	if err != nil {
		t.Fatal(err)
	}
	if tf.kind != TokenizerVocab || tf.chatTemplate != "" {
		t.Fatalf("kind %q, chat template %q; want %q and none", tf.kind, tf.chatTemplate, TokenizerVocab)
	}
	var v tokenizer.Vocab
	if err := json.Unmarshal(tf.data, &v); err != nil {
		t.Fatal(err)
	}
	shipped, err := tokenizer.NewVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Once upon a time, there was a little girl named Lily.", " two  spaces", "Ünïcode ☃ and\nnewlines\t", ""} {
		want := ref.Encode(text, true, false)
		if got := shipped.Encode(text, true, false); !slices.Equal(got, want) {
			t.Errorf("%q: shipped vocabulary encodes %v; llama2.c %v", text, got, want)
		}
		if got := tf.tok.Encode(text, true, false); !slices.Equal(got, want) {
			t.Errorf("%q: worker's tokenizer encodes %v; llama2.c %v", text, got, want)
		}
	}

	// A vocabulary-only GGUF with a chat template, as -tokenizer.
	md, err := gguf.ReadMetadataFile(model)
	if err != nil {
		t.Fatal(err)
	}
	const tmpl = "{% for m in messages %}{{ bos_token }}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"
	kvs := append(slices.Clone(md.KVs), gguf.KV{Key: "tokenizer.chat_template", Value: tmpl})
	vocabOnly := filepath.Join(t.TempDir(), "vocab.gguf")
	f, err := os.Create(vocabOnly)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(f, kvs, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tf, err = readTokenizerFile(vocabOnly)
	if err != nil {
		t.Fatal(err)
	}
	if tf.kind != TokenizerVocab || tf.chatTemplate != tmpl {
		t.Fatalf("kind %q, chat template %q; want %q and %q", tf.kind, tf.chatTemplate, TokenizerVocab, tmpl)
	}
}

// hfTokenizer is a small byte-level BPE tokenizer.json.
const hfTokenizer = `{
  "version": "1.0",
  "added_tokens": [{"id": 12, "content": "<|endoftext|>", "special": true, "normalized": false}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "byte_fallback": false, "fuse_unk": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "Ġh": 5, "he": 6, "ll": 7, "Ġhe": 8, "hell": 9, "hello": 10, "Ġhello": 11, "<|endoftext|>": 12},
    "merges": ["Ġ h", "h e", "l l", "Ġh e", "he ll", "hell o", "Ġhe ll", "Ġhell o"]}
}`

func TestReadTokenizerFileHF(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, config, template string
	}{
		{"no config", "", ""},
		{"string template", `{"eos_token": "<|endoftext|>", "chat_template": "{{ messages[0].content }}"}`, "{{ messages[0].content }}"},
		{"named templates", `{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}`, "D"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "tokenizer.json")
			if err := os.WriteFile(path, []byte(hfTokenizer), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tf, err := readTokenizerFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tf.kind != TokenizerVocab || tf.chatTemplate != tc.template {
				t.Fatalf("kind %q, chat template %q; want %q and %q", tf.kind, tf.chatTemplate, TokenizerVocab, tc.template)
			}
			if got, want := tf.tok.Encode("hello hello", false, false), []uint32{10, 11}; !slices.Equal(got, want) {
				t.Errorf("encodes %v; want %v", got, want)
			}
		})
	}
}

// A file that is no tokenizer is one error naming it.
func TestReadTokenizerFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, tc := range []struct {
		name, content, config, want string
	}{
		{"bad.gguf", "GGUF\x03\x00\x00\x00", "", "bad.gguf"},
		{"bad.json", `{"model": {"type": "WordLevel"}}`, "", "bad.json"},
		{"tokenizer.json", hfTokenizer, `{"chat_template": [{"name": "x", "template": "T"}]}`, `without a "default" template`},
		{"garbage.bin", "\x01\x00", "", "garbage.bin"},
	} {
		sub := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, tc.name)
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if tc.config != "" {
			if err := os.WriteFile(filepath.Join(sub, "tokenizer_config.json"), []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := readTokenizerFile(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want it to name %q", tc.name, err, tc.want)
		}
	}
	if _, err := readTokenizerFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}
}
