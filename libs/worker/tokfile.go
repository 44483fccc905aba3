package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"switchyard.dev/libs/engine/gguf"
	"switchyard.dev/libs/engine/tokenizer"
)

// TokenizerVocab is the tokenizer kind of a real model's vocabulary,
// shipped to frontends as the JSON encoding of tokenizer.Vocab.
const TokenizerVocab = "vocab"

// tokenizerFile is a tokenizer the worker read from a file and ships to
// frontends (GetModelInfo), so that a frontend tokenizes exactly as the
// worker's loader decided.
type tokenizerFile struct {
	tok  tokenizer.Tokenizer
	kind string // TokenizerLlama2c or TokenizerVocab
	data []byte
	// chatTemplate is the model's own chat template, "" when it has none.
	chatTemplate string
}

// ggufMagic opens every GGUF file.
var ggufMagic = []byte("GGUF")

// readTokenizerFile reads the tokenizer at path, telling its format by
// its content: a GGUF file (the tokenizer.* metadata of a model, or of a
// vocabulary-only file), a Hugging Face tokenizer.json (with the
// tokenizer_config.json beside it, when there is one, for BOS, EOS and
// the chat template), or a llama2.c tokenizer.bin.
func readTokenizerFile(path string) (tokenizerFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return tokenizerFile{}, err
	}
	head := make([]byte, 4)
	n, _ := f.Read(head)
	_ = f.Close()
	head = head[:n]
	switch {
	case bytes.Equal(head, ggufMagic):
		return readGGUFTokenizer(path)
	case len(bytes.TrimLeft(head, " \t\r\n")) > 0 && bytes.TrimLeft(head, " \t\r\n")[0] == '{':
		return readHFTokenizer(path)
	}
	b, tok, err := loadTokenizer(path)
	if err != nil {
		return tokenizerFile{}, err
	}
	return tokenizerFile{tok: tok, kind: TokenizerLlama2c, data: b}, nil
}

func readGGUFTokenizer(path string) (tokenizerFile, error) {
	md, err := gguf.ReadMetadataFile(path)
	if err != nil {
		return tokenizerFile{}, fmt.Errorf("-tokenizer=%q: %w", path, err)
	}
	v, err := gguf.Vocab(md)
	if err != nil {
		return tokenizerFile{}, fmt.Errorf("-tokenizer=%q: %w", path, err)
	}
	tf, err := vocabFile(path, v)
	if err != nil {
		return tokenizerFile{}, err
	}
	if t, ok := md.Get("tokenizer.chat_template"); ok {
		s, ok := t.(string)
		if !ok {
			return tokenizerFile{}, fmt.Errorf("-tokenizer=%q: tokenizer.chat_template is a %T, not a string", path, t)
		}
		tf.chatTemplate = s
	}
	return tf, nil
}

func readHFTokenizer(path string) (tokenizerFile, error) {
	tj, err := os.ReadFile(path)
	if err != nil {
		return tokenizerFile{}, err
	}
	cfgPath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return tokenizerFile{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	v, err := tokenizer.HFVocab(tj, cfg)
	if err != nil {
		return tokenizerFile{}, fmt.Errorf("-tokenizer=%q: %w", path, err)
	}
	tf, err := vocabFile(path, v)
	if err != nil {
		return tokenizerFile{}, err
	}
	if len(cfg) > 0 {
		if tf.chatTemplate, err = configChatTemplate(cfg); err != nil {
			return tokenizerFile{}, fmt.Errorf("%s: %w", cfgPath, err)
		}
	}
	return tf, nil
}

func vocabFile(path string, v tokenizer.Vocab) (tokenizerFile, error) {
	tok, err := tokenizer.NewVocab(v)
	if err != nil {
		return tokenizerFile{}, fmt.Errorf("-tokenizer=%q: %w", path, err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return tokenizerFile{}, fmt.Errorf("-tokenizer=%q: encoding its vocabulary: %w", path, err)
	}
	return tokenizerFile{tok: tok, kind: TokenizerVocab, data: data}, nil
}

// configChatTemplate is tokenizer_config.json's chat_template: a string,
// or a list of named templates of which "default" is the chat one.
func configChatTemplate(cfg []byte) (string, error) {
	var c struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return "", err
	}
	if len(c.ChatTemplate) == 0 || string(c.ChatTemplate) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(c.ChatTemplate, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(c.ChatTemplate, &named); err != nil {
		return "", fmt.Errorf("chat_template: want a string or a list of {name, template}: %w", err)
	}
	for _, t := range named {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", errors.New(`chat_template: a list without a "default" template`)
}

// loadTokenizer reads a llama2.c tokenizer file, its vocabulary size
// being the number of its entries (the engine's vocabulary is checked
// against it).
func loadTokenizer(path string) ([]byte, tokenizer.Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("-tokenizer=%q: %w", path, err)
	}
	n, err := tokenizer.BPEEntries(b)
	if err != nil {
		return nil, nil, fmt.Errorf("-tokenizer=%q: %w", path, err)
	}
	tok, err := tokenizer.ParseBPE(b, n)
	if err != nil {
		return nil, nil, fmt.Errorf("-tokenizer=%q: %w", path, err)
	}
	return b, tok, nil
}
