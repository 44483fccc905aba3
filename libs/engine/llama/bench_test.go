package llama

import (
	"fmt"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/sharedtest"
)

// benchModel is stories260K when present, else its random twin: the
// arithmetic cost is identical.
func benchModel(b *testing.B, k Kernel) *Executor {
	b.Helper()
	if dir, ok := sharedtest.Optional(b, sharedtest.Stories260K); ok {
		e, err := Open(filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin"), Options{Kernel: k})
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	e, err := NewTinyRandom(Stories260K, 1, Options{Kernel: k})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// decodeBatch prepares batch sequences that have prefilled prompt tokens,
// each with its own blocks.
func decodeBatch(b *testing.B, e *Executor, batch, prompt, maxLen int) *executor.Batch {
	per := (maxLen + 15) / 16
	bind(b, e, batch*per)
	bt := &executor.Batch{}
	for i := range batch {
		tokens := make([]uint32, prompt, maxLen)
		for j := range tokens {
			tokens[j] = uint32(3 + (i*31+j*7)%500)
		}
		blocks := make([]int, per)
		for j := range blocks {
			blocks[j] = i*per + j
		}
		bt.Items = append(bt.Items, executor.Item{Tokens: tokens, Start: 0, End: prompt, Blocks: blocks, Sample: true})
	}
	if err := e.Execute(b.Context(), bt); err != nil {
		b.Fatal(err)
	}
	return bt
}

// advance turns the batch into the next decode step, restarting sequences
// that reached maxLen at position prompt so context length stays bounded.
func advance(bt *executor.Batch, prompt, maxLen int) {
	for i := range bt.Items {
		it := &bt.Items[i]
		it.Tokens = append(it.Tokens, it.Out)
		if len(it.Tokens) >= maxLen {
			it.Tokens = it.Tokens[:prompt+1]
		}
		it.Start, it.End = len(it.Tokens)-1, len(it.Tokens)
	}
}

// stories15MShape is llama2.c's stories15M shape (random weights here):
// 60 MB of weights, more than the caches hold, so a decode step is bound
// by streaming the weights and batching shares that cost, as on a GPU.
var stories15MShape = Config{Dim: 288, HiddenDim: 768, NLayers: 6, NHeads: 6, NKVHeads: 6, VocabSize: 32000, SeqLen: 256, SharedClassifier: true}

// BenchmarkDecodeStories15MShape is BenchmarkDecode's batch scaling at a
// size where weights, not attention, dominate a token's cost.
func BenchmarkDecodeStories15MShape(b *testing.B) {
	for _, batch := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e, err := NewTinyRandom(stories15MShape, 1, Options{})
			if err != nil {
				b.Fatal(err)
			}
			benchDecode(b, e, batch)
		})
	}
}

// benchDecode decodes batch sequences, each at positions 16..128 (then
// restarted at 16), and reports tokens/s over all of them.
func benchDecode(b *testing.B, e *Executor, batch int) {
	const prompt, maxLen = 16, 128
	bt := decodeBatch(b, e, batch, prompt, maxLen)
	for b.Loop() {
		advance(bt, prompt, maxLen)
		if err := e.Execute(b.Context(), bt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkDecode reports decode throughput at several batch sizes; tok/s
// at batch 1 is the single-stream number.
func BenchmarkDecode(b *testing.B) {
	for _, k := range []Kernel{KernelSIMD, KernelGo} {
		for _, batch := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("%v/batch=%d", k, batch), func(b *testing.B) {
				benchDecode(b, benchModel(b, k), batch)
			})
		}
	}
}

// BenchmarkPrefill reports prompt processing throughput for a 256-token
// prompt in one step.
func BenchmarkPrefill(b *testing.B) {
	const n = 256
	for _, k := range []Kernel{KernelSIMD, KernelGo} {
		b.Run(k.String(), func(b *testing.B) {
			e := benchModel(b, k)
			bt := decodeBatch(b, e, 1, n, n+16)
			for b.Loop() {
				bt.Items[0].Start, bt.Items[0].End = 0, n
				bt.Items[0].Tokens = bt.Items[0].Tokens[:n]
				if err := e.Execute(b.Context(), bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
