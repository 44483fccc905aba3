package profile

import (
	"math"
	"testing"
)

// golden is testdata/stories260K.json as a value: prefill at 128, 512 and
// 2048 tokens; decode rows at context 512 (batch 1, 8, 32, 64) and 2048
// (batch 1, 8, 32).
func golden() *Profile {
	return &Profile{
		Version: Version, Model: "stories260K", Executor: "sim", BlockSize: 16, KVBlocks: 16384,
		Prefill: []PrefillPoint{{128, 0.012}, {512, 0.040}, {2048, 0.170}},
		Decode: []DecodePoint{
			{1, 512, 0.004}, {8, 512, 0.005}, {32, 512, 0.008}, {64, 512, 0.012},
			{1, 2048, 0.005}, {8, 2048, 0.007}, {32, 2048, 0.014},
		},
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

func TestPrefillSeconds(t *testing.T) {
	t.Parallel()
	steep := &Profile{Prefill: []PrefillPoint{{100, 0.001}, {200, 0.011}}}
	flatTail := &Profile{Prefill: []PrefillPoint{{100, 0.01}, {200, 0.02}, {300, 0.021}}}
	one := &Profile{Prefill: []PrefillPoint{{100, 0.01}}}
	tests := []struct {
		name   string
		p      *Profile
		tokens int
		want   float64
	}{
		{"measured point", golden(), 128, 0.012},
		{"last point", golden(), 2048, 0.170},
		{"interpolated", golden(), 320, 0.026},
		{"extrapolated past the end", golden(), 4096, 0.17 + 2048*0.13/1536},
		{"extrapolated below the start", golden(), 64, 0.012 - 64*0.028/384},
		{"floor below the start", steep, 10, 10 * 1e-5},
		{"floor past the end", flatTail, 1000, 1000 * 7e-5},
		{"one point is a rate", one, 250, 0.025},
		{"zero tokens", golden(), 0, 0},
		{"negative tokens", golden(), -3, 0},
		{"no points", &Profile{}, 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.PrefillSeconds(tt.tokens); !near(got, tt.want) {
				t.Errorf("PrefillSeconds(%d) = %v, want %v", tt.tokens, got, tt.want)
			}
		})
	}
}

func TestPrefillTokensPerSecond(t *testing.T) {
	t.Parallel()
	p := golden()
	if got, want := p.PrefillTokensPerSecond(512), 512/0.040; !near(got, want) {
		t.Errorf("PrefillTokensPerSecond(512) = %v, want %v", got, want)
	}
	if got := p.PrefillTokensPerSecond(0); got != 0 {
		t.Errorf("PrefillTokensPerSecond(0) = %v, want 0", got)
	}
}

func TestDecodeITL(t *testing.T) {
	t.Parallel()
	oneContext := &Profile{Decode: []DecodePoint{{1, 512, 0.004}, {8, 512, 0.005}}}
	dip := &Profile{Decode: []DecodePoint{{1, 512, 0.004}, {8, 512, 0.006}, {16, 512, 0.0055}}}
	borrowed := &Profile{Decode: []DecodePoint{{1, 512, 0.004}, {8, 512, 0.006}, {1, 4096, 0.008}}}
	shorterSlower := &Profile{Decode: []DecodePoint{{1, 512, 0.006}, {8, 512, 0.008}, {1, 2048, 0.005}, {8, 2048, 0.007}}}
	tests := []struct {
		name           string
		p              *Profile
		batch, context int
		want           float64
	}{
		{"measured point", golden(), 8, 512, 0.005},
		{"between batches", golden(), 20, 512, 0.0065},
		{"past the largest batch", golden(), 128, 512, 0.012 + 64*0.004/32},
		{"between contexts", golden(), 8, 1280, 0.006},
		{"past the longest context", golden(), 8, 3584, 0.009},
		{"below the shortest context is flat", golden(), 8, 100, 0.005},
		{"row without the batch extrapolates", golden(), 64, 2048, 0.014 + 32*0.007/24},
		{"bilinear with an extrapolated row", golden(), 64, 1280, (0.012 + 0.014 + 32*0.007/24) / 2},
		{"one context ignores context", oneContext, 8, 4096, 0.005},
		{"one context extrapolates in batch", oneContext, 15, 100, 0.006},
		{"a falling tail does not fall further", dip, 32, 512, 0.0055},
		{"a one-point row borrows its shape", borrowed, 8, 4096, 0.008 * 0.006 / 0.004},
		{"past the longest context never falls", shorterSlower, 8, 4096, 0.007},
		{"batch zero", golden(), 0, 512, 0},
		{"no points", &Profile{}, 1, 512, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.DecodeITL(tt.batch, tt.context); !near(got, tt.want) {
				t.Errorf("DecodeITL(%d, %d) = %v, want %v", tt.batch, tt.context, got, tt.want)
			}
		})
	}
}

func TestMaxBatchWithin(t *testing.T) {
	t.Parallel()
	nonMonotone := &Profile{BlockSize: 16, KVBlocks: 1 << 20, Decode: []DecodePoint{
		{1, 512, 0.004}, {8, 512, 0.010}, {16, 512, 0.006}, {32, 512, 0.012},
	}}
	flat := &Profile{BlockSize: 16, KVBlocks: 1 << 30, Decode: []DecodePoint{{1, 16, 0.004}, {8, 16, 0.004}}}
	tests := []struct {
		name                   string
		p                      *Profile
		target                 float64
		context, kv, blockSize int
		want                   int
	}{
		{"target just above a point", golden(), 0.0080001, 512, 0, 0, 32},
		{"between points", golden(), 0.00651, 512, 0, 0, 20},
		{"extrapolated batch", golden(), 0.0201, 512, 0, 0, 128},
		{"batch 1 misses", golden(), 0.003, 512, 0, 0, 0},
		{"KV bounds the batch", golden(), 1, 512, 100, 16, 3},
		{"profile's KV by default", golden(), 1, 512, 0, 0, 512},
		{"partial blocks count whole", golden(), 1, 17, 100, 16, 50},
		{"one sequence does not fit", golden(), 1, 1 << 20, 100, 16, 0},
		{"first crossing, not the last", nonMonotone, 0.008, 512, 0, 0, 5},
		{"flat ITL is bounded by KV alone", flat, 0.005, 16, 0, 0, 1 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.p.MaxBatchWithin(tt.target, tt.context, tt.kv, tt.blockSize)
			if got != tt.want {
				t.Errorf("MaxBatchWithin(%v, %d, %d, %d) = %d, want %d", tt.target, tt.context, tt.kv, tt.blockSize, got, tt.want)
			}
		})
	}
}

// TestMaxBatchWithinAgreesWithScan checks the segment search against a
// plain scan over every batch on a grid of targets and contexts.
func TestMaxBatchWithinAgreesWithScan(t *testing.T) {
	t.Parallel()
	p := golden()
	p.KVBlocks = 2000
	for _, ctx := range []int{16, 300, 512, 1000, 2048, 3000} {
		for target := 0.003; target < 0.05; target += 0.00037 {
			want := 0
			for b := 1; b*((ctx+15)/16) <= p.KVBlocks && p.DecodeITL(b, ctx) <= target; b++ {
				want = b
			}
			if got := p.MaxBatchWithin(target, ctx, 0, 0); got != want {
				t.Errorf("MaxBatchWithin(%v, %d) = %d, scan says %d", target, ctx, got, want)
			}
		}
	}
}

func BenchmarkMaxBatchWithin(b *testing.B) {
	p := golden()
	for b.Loop() {
		p.MaxBatchWithin(0.02, 1000, 0, 0)
	}
}
