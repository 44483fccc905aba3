package engine

import (
	"fmt"
	"sync"
	"testing"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/sharedtest"
)

// benchExec is stories260K when present, else its random twin (same cost).
func benchExec(b *testing.B) executor.Executor {
	if _, ok := sharedtest.Optional(b, sharedtest.Stories260K); ok {
		return stories(b)
	}
	e, err := llama.NewTinyRandom(llama.Stories260K, 1, llama.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// throughput runs batch concurrent requests of gen tokens each per
// iteration and reports generated tokens per second.
func throughput(b *testing.B, e *Engine, batch, promptLen, gen int) {
	b.Helper()
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range batch {
			st, err := e.Submit(b.Context(), Request{Prompt: prompt(promptLen, i), Stop: StopParams{MaxTokens: gen, IgnoreEOS: true}})
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); collect(b, st) }()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*batch*gen)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkEngineDecode is end-to-end decode throughput (scheduler,
// streams and the llama executor) at several batch sizes; batch=1 is
// single-stream tokens/s.
func BenchmarkEngineDecode(b *testing.B) {
	for _, batch := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := start(b, Config{MaxRunning: 64, NumBlocks: 64 * 8}, benchExec(b))
			throughput(b, e, batch, 8, 64)
		})
	}
}

// BenchmarkSimOverhead measures the engine's own cost per token with a
// zero-time simulator.
func BenchmarkSimOverhead(b *testing.B) {
	ex, err := sim.New(sim.Config{VocabSize: 512, ContextLen: 4096})
	if err != nil {
		b.Fatal(err)
	}
	e := start(b, Config{MaxRunning: 64}, ex)
	throughput(b, e, 16, 64, 64)
}
