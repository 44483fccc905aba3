package llama

import (
	"path/filepath"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/sharedtest"
)

const storiesRef = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high."

func bind(t testing.TB, e *Executor, blocks int) {
	t.Helper()
	bindBlockSize(t, e, blocks, 16)
}

// bindBlockSize binds e to a fresh KV pool of blocks blocks of bs tokens.
func bindBlockSize(t testing.TB, e *Executor, blocks, bs int) {
	t.Helper()
	kv, err := kvcache.New(kvcache.Config{NumBlocks: blocks, BlockSize: bs, BlockBytes: bs * e.c.KVBytesPerToken()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	if err := e.Bind(executor.KV{Arena: kv.Arena(), BlockSize: bs, BlockBytes: bs * e.c.KVBytesPerToken(), NumBlocks: blocks}); err != nil {
		t.Fatal(err)
	}
}

// greedy generates n tokens for one sequence using blocks 0.. in order,
// prefilling chunk tokens per step.
func greedy(t testing.TB, e *Executor, prompt []uint32, n, chunk int) []uint32 {
	t.Helper()
	tokens := append([]uint32(nil), prompt...)
	blocks := make([]int, e.c.SeqLen/16+1)
	for i := range blocks {
		blocks[i] = i
	}
	computed := 0
	for len(tokens) < len(prompt)+n {
		end := min(computed+chunk, len(tokens))
		b := &executor.Batch{Items: []executor.Item{{Tokens: tokens, Start: computed, End: end, Blocks: blocks, Sample: end == len(tokens)}}}
		if err := e.Execute(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		computed = end
		if b.Items[0].Sample {
			if b.Items[0].Out == tokenizer.BOS {
				break
			}
			tokens = append(tokens, b.Items[0].Out)
		}
	}
	return tokens
}

func TestStoriesGreedyMatchesReference(t *testing.T) {
	t.Parallel()
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	for _, k := range []Kernel{KernelSIMD, KernelGo} {
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			e, err := Open(filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin"), Options{Kernel: k})
			if err != nil {
				t.Fatal(err)
			}
			bind(t, e, 40)
			prompt := e.tok.Encode("Once upon a time", true, false)
			out := greedy(t, e, prompt, 60, 512)
			text := string(tokenizer.Decode(e.tok, tokenizer.BOS, out[1:]))
			if !strings.HasPrefix(storiesRef, text) && !strings.HasPrefix(text, storiesRef) {
				t.Fatalf("greedy output differs from run.c:\n got: %q\nwant: %q", text, storiesRef)
			}
			if len(text) < 150 {
				t.Fatalf("only %d bytes generated: %q", len(text), text)
			}
		})
	}
}
