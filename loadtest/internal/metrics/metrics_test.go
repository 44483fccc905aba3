package metrics

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPercentile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"empty", nil, 50, 0},
		{"single", []float64{7}, 99, 7},
		{"p0 is min", []float64{1, 2, 3}, 0, 1},
		{"p100 is max", []float64{1, 2, 3}, 100, 3},
		{"median odd", []float64{1, 2, 3}, 50, 2},
		{"median even interpolates", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p90 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9.1},
		{"p99 of 1..100", seq(100), 99, 99.01},
		{"p50 of 1..100", seq(100), 50, 50.5},
		{"ties", []float64{5, 5, 5, 5}, 90, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tt.sorted, tt.p); !near(got, tt.want) {
				t.Fatalf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func seq(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i + 1)
	}
	return s
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	in := []float64{4, 1, 3, 2}
	s := Summarize(in)
	want := Summary{Count: 4, Mean: 2.5, Std: math.Sqrt(1.25), Min: 1, P50: 2.5, P90: 3.7, P99: 3.97, Max: 4}
	if s.Count != want.Count || !near(s.Mean, want.Mean) || !near(s.Std, want.Std) || s.Min != want.Min ||
		!near(s.P50, want.P50) || !near(s.P90, want.P90) || !near(s.P99, want.P99) || s.Max != want.Max {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	if in[0] != 4 {
		t.Fatal("Summarize modified its input")
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("empty sample should give zero Summary")
	}
}

func rec(ttft, e2e time.Duration, out int, itls ...time.Duration) Record {
	return Record{TTFT: ttft, E2E: e2e, OutputTokens: out, Chunks: out, ITLs: itls, InputTokens: 100}
}

func TestSLAMeets(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	good := rec(100*ms, 300*ms, 3, 100*ms, 100*ms)
	tests := []struct {
		name string
		sla  SLA
		r    Record
		want bool
	}{
		{"no thresholds", SLA{}, good, true},
		{"ttft at limit", SLA{TTFT: 100 * ms}, good, true},
		{"ttft over", SLA{TTFT: 99 * ms}, good, false},
		{"itl at limit", SLA{ITL: 100 * ms}, good, true},
		{"itl over", SLA{ITL: 50 * ms}, good, false},
		{"itl mean not max", SLA{ITL: 60 * ms}, rec(10*ms, 200*ms, 3, 100*ms, 10*ms), true},
		{"e2e over", SLA{E2E: 200 * ms}, good, false},
		{"both ok", SLA{TTFT: time.Second, ITL: time.Second}, good, true},
		{"failed never meets", SLA{}, Record{Err: "boom"}, false},
		{"canceled never meets", SLA{}, Record{Canceled: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.sla.Meets(&tt.r); got != tt.want {
				t.Fatalf("Meets = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAggregateGoodput(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	recs := []Record{
		rec(50*ms, 150*ms, 3, 50*ms, 50*ms),    // meets
		rec(80*ms, 180*ms, 3, 50*ms, 50*ms),    // meets
		rec(500*ms, 600*ms, 3, 50*ms, 50*ms),   // ttft too slow
		rec(50*ms, 1050*ms, 3, 500*ms, 500*ms), // itl too slow
		{Err: "HTTP 500: boom", Status: 500},
		{Err: "HTTP 500: boom", Status: 500},
		{Err: "connection refused"},
		{Canceled: true, Err: "canceled"},
	}
	recs[0].UsageReported, recs[0].PromptTokens, recs[0].CachedTokens = true, 200, 150
	a := Aggregate(recs, 2*time.Second, SLA{TTFT: 100 * ms, ITL: 100 * ms})
	checks := []struct {
		name      string
		got, want float64
	}{
		{"total", float64(a.Total), 8},
		{"succeeded", float64(a.Succeeded), 4},
		{"failed", float64(a.Failed), 3},
		{"canceled", float64(a.Canceled), 1},
		{"met", float64(a.Goodput.Met), 2},
		{"goodput rps", a.Goodput.RPS, 1},
		{"fraction", a.Goodput.Fraction, 0.5},
		{"request throughput", a.RequestThroughput, 2},
		{"output tps", a.OutputTokenThroughput, 6},
		{"input tps", a.InputTokenThroughput, 250},
		{"total tps", a.TotalTokenThroughput, 256},
		{"prompt total", float64(a.PromptTokens), 500},
		{"cached", float64(a.CachedTokens), 150},
		{"hit ratio", a.CacheHitRatio, 0.3},
		{"ttft p50", a.TTFTms.P50, 65},
		{"itl count", float64(a.ITLms.Count), 8},
		{"tpot max", a.TPOTms.Max, 500},
		{"sla ttft ms", a.Goodput.SLATTFTms, 100},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(a.Errors) != 2 || a.Errors[0] != (ErrorCount{"HTTP 500: boom", 2}) {
		t.Errorf("errors = %+v", a.Errors)
	}
}

func TestAggregateEmpty(t *testing.T) {
	t.Parallel()
	a := Aggregate(nil, 0, SLA{})
	if a.Total != 0 || a.RequestThroughput != 0 || a.CacheHitRatio != 0 {
		t.Fatalf("empty aggregate = %+v", a)
	}
}

func TestRecordDerived(t *testing.T) {
	t.Parallel()
	r := rec(100*time.Millisecond, 400*time.Millisecond, 4, 50*time.Millisecond, 150*time.Millisecond)
	r.Start = time.Second
	if r.TPOT() != 100*time.Millisecond || r.MeanITL() != 100*time.Millisecond || r.End() != 1400*time.Millisecond {
		t.Fatalf("TPOT %v MeanITL %v End %v", r.TPOT(), r.MeanITL(), r.End())
	}
	one := rec(time.Millisecond, time.Millisecond, 1)
	if one.TPOT() != 0 || one.MeanITL() != 0 {
		t.Fatal("single-token request should have zero TPOT and ITL")
	}
}
