package llamacpp

import (
	"bufio"
	"errors"
	"fmt"
	"os"

	"switchyard.dev/libs/engine/gguf"
)

// GGUF is what a worker checks in a GGUF file before handing it to
// llama-server, whose own error for a file it cannot load is a log line
// among hundreds.
type GGUF struct {
	Name         string // general.name
	Architecture string // general.architecture
	ContextLen   int    // <architecture>.context_length
	VocabSize    int    // entries of tokenizer.ggml.tokens
}

// ReadGGUF reads the metadata of the GGUF file at path (not its tensors).
func ReadGGUF(path string) (GGUF, error) {
	f, err := os.Open(path)
	if err != nil {
		return GGUF{}, err
	}
	defer f.Close()
	md, err := gguf.ReadMetadata(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return GGUF{}, fmt.Errorf("not a GGUF model llama.cpp can load: %w", err)
	}
	g, err := fromMetadata(md)
	if err != nil {
		return GGUF{}, fmt.Errorf("not a GGUF model llama.cpp can load: %w", err)
	}
	return g, nil
}

func fromMetadata(md gguf.Metadata) (GGUF, error) {
	var g GGUF
	g.Name, _ = getString(md, "general.name")
	g.Architecture, _ = getString(md, "general.architecture")
	if g.Architecture == "" {
		return GGUF{}, errors.New("no general.architecture")
	}
	if toks, ok := md.Get("tokenizer.ggml.tokens"); ok {
		if s, ok := toks.([]string); ok {
			g.VocabSize = len(s)
		}
	}
	if g.VocabSize == 0 {
		return GGUF{}, errors.New("no tokenizer.ggml.tokens: the file carries no vocabulary")
	}
	key := g.Architecture + ".context_length"
	v, _ := md.Get(key)
	switch n := v.(type) {
	case uint32:
		g.ContextLen = int(n)
	case uint64:
		g.ContextLen = int(min(n, 1<<31))
	case int32:
		g.ContextLen = int(max(n, 0))
	case int64:
		g.ContextLen = int(min(max(n, 0), 1<<31))
	}
	if g.ContextLen == 0 {
		return GGUF{}, fmt.Errorf("no %s", key)
	}
	return g, nil
}

func getString(md gguf.Metadata, key string) (string, bool) {
	v, ok := md.Get(key)
	s, isStr := v.(string)
	return s, ok && isStr
}
