package engine

import (
	"fmt"
	"sync"
	"testing"

	"switchyard.dev/libs/engine/sample"
)

// BenchmarkDecodeConstrained is the engine's cost per generated token
// with and without a structured output: stories260K, outputs of up to 128
// tokens after an 8-token prompt, one stream and 16 at once. Greedy, the
// difference between a format and free text is the mask's cost per token
// (one Mask and one Accept, package constrain, and the copy of the logits
// they work on). At temperature 1 the draw sorts the vocabulary by
// probability, which costs less when most tokens are masked to zero, so
// that difference is smaller. A value may end before 128 tokens
// (tokens/request); compare at equal lengths, since a shorter context
// makes a token's attention cheaper.
func BenchmarkDecodeConstrained(b *testing.B) {
	formats := []struct {
		name string
		f    sample.Format
	}{
		{"free", sample.Format{}},
		{"json_object", sample.Format{JSONObject: true}},
		{"schema", sample.Format{JSONSchema: formatSchemas[0]}},
	}
	for _, batch := range []int{1, 16} {
		for _, temp := range []float32{0, 1} {
			for _, tc := range formats {
				b.Run(fmt.Sprintf("batch=%d/temp=%v/%s", batch, temp, tc.name), func(b *testing.B) {
					decodeConstrained(b, batch, sample.Params{Temperature: temp, Format: tc.f})
				})
			}
		}
	}
}

func decodeConstrained(b *testing.B, batch int, p sample.Params) {
	e := start(b, Config{MaxRunning: 64}, benchExec(b))
	var mu sync.Mutex
	tokens := 0
	for i := 0; b.Loop(); i++ {
		var wg sync.WaitGroup
		for j := range batch {
			sp := p
			sp.Seed = seed(uint64(i*batch + j))
			r := Request{Prompt: prompt(8, j), Sampling: sp, Stop: StopParams{MaxTokens: 128, IgnoreEOS: true}}
			wg.Go(func() {
				n := run(b, e, r).final.Usage.CompletionTokens
				mu.Lock()
				tokens += n
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(tokens, 1)), "ns/token")
	b.ReportMetric(float64(tokens)/float64(b.N*batch), "tokens/request")
}
