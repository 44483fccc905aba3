package engine

import (
	"testing"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sched"
)

func TestNewCoreFillsTheEnginesDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                    string
		cfg                     Config
		context                 int
		wantBlocks, wantMaxLen  int
		wantBudget, wantRunning int
	}{
		// 16 contexts of 1,000 tokens in blocks of 16: 16 × 63 blocks.
		{"defaults", Config{}, 1000, 1008, 1000, 512, 64},
		// A pool smaller than the context ends sequences at the pool.
		{"small pool", Config{NumBlocks: 10}, 1000, 10, 160, 512, 64},
		// The running cap never exceeds the budget.
		{"small budget", Config{MaxBatchTokens: 32}, 1000, 1008, 1000, 32, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewCore(tc.cfg, executor.Model{ContextLen: tc.context})
			if err != nil {
				t.Fatal(err)
			}
			defer c.KV.Close()
			if c.Config.NumBlocks != tc.wantBlocks || c.KV.NumBlocks() != tc.wantBlocks || c.MaxLen != tc.wantMaxLen ||
				c.Config.MaxBatchTokens != tc.wantBudget || c.Config.MaxRunning != tc.wantRunning || c.Config.BlockSize != 16 {
				t.Fatalf("core %+v, max len %d; want %d blocks, max len %d, budget %d, running cap %d",
					c.Config, c.MaxLen, tc.wantBlocks, tc.wantMaxLen, tc.wantBudget, tc.wantRunning)
			}
		})
	}
	if _, err := NewCore(Config{WatermarkFraction: 1}, executor.Model{ContextLen: 100}); err == nil {
		t.Fatal("a watermark of the whole pool was accepted")
	}
	if _, err := NewCore(Config{PrefillOrder: "lifo"}, executor.Model{ContextLen: 100}); err == nil {
		t.Fatal("an unknown prefill order was accepted")
	}
}

func TestStepStatsReadsThePlanAndThePool(t *testing.T) {
	t.Parallel()
	c, err := NewCore(Config{NumBlocks: 100, MaxBatchTokens: 64}, executor.Model{ContextLen: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.KV.Close()
	c.Sched.Add(&sched.Seq{ID: 1, Tokens: make([]uint32, 40), PromptLen: 40})
	p := c.Sched.Schedule()
	var b executor.Batch
	StepStats(&b, p, c.KV)
	if b.PrefillTokens != 40 || b.DecodeTokens != 0 || b.UsedBlocks != 3 || b.TotalBlocks != 100 {
		t.Fatalf("batch %+v: want 40 prefill tokens, 3 of 100 blocks in use", b)
	}
}
