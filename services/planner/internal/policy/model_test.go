package policy

import (
	"math"
	"strings"
	"testing"

	"switchyard.dev/services/planner/internal/profile"
)

// lineProfile has round numbers: a prefill takes 10 ms per 100 tokens,
// and ITL is 4 ms + 0.1 ms per sequence beyond the first at any context.
func lineProfile(kvBlocks int) *profile.Profile {
	return &profile.Profile{
		Version: profile.Version, Model: "m", BlockSize: 16, KVBlocks: kvBlocks,
		Prefill: []profile.PrefillPoint{{InputTokens: 100, Seconds: 0.01}},
		Decode:  []profile.DecodePoint{{Batch: 1, ContextTokens: 512, ITLSeconds: 0.004}, {Batch: 101, ContextTokens: 512, ITLSeconds: 0.014}},
	}
}

func TestModelNeeds(t *testing.T) {
	t.Parallel()
	m := model{prof: testProfile(), ttft: 0.2, itl: 0.02}
	line := model{prof: lineProfile(16384), ttft: 0.2, itl: 0.02005}
	tight := model{prof: lineProfile(100), ttft: 0.2, itl: 0.02005}
	tests := []struct {
		name       string
		got        need
		want       int
		infeasible string // reason, when infeasible
	}{
		// 100 req/s × 40 ms is a = 4 replicas busy: 5 meet a 200 ms p90
		// (108 ms, TestExpectedLatency); with the p90 counted twice, 6.
		{"prefill", m.prefill(load{100, 512, 256}, 1), 5, ""},
		{"prefill corrected", m.prefill(load{100, 512, 256}, 2), 6, ""},
		{"prefill idle", m.prefill(load{0, 512, 256}, 1), 0, ""},
		{"prefill infeasible", model{prof: testProfile(), ttft: 0.03, itl: 0.02}.prefill(load{1, 512, 256}, 1), 0, "TTFT target 30ms below a lone prefill's 40ms"},
		// A correction that puts even a lone prefill over the target: the
		// tail misses it at any count, so the pool is planned for no wait
		// at the p90 (C(n, 4) ≤ 0.1 from n = 8), not for its cap.
		{"prefill corrected past the target", m.prefill(load{100, 512, 256}, 5), 8, ""},
		// B* = 161 (ITL 20 ms); 10 × 100 × 20 ms = 20 sequences: 1 replica.
		{"decode", line.decode(load{10, 100, 100}, 1), 1, ""},
		// 100 × 200 × 20 ms = 400 sequences / 161 = 2.48.
		{"decode more", line.decode(load{100, 100, 200}, 1), 3, ""},
		// 200-token contexts take 13 blocks: 7 fit in 100; ITL(7) 4.6 ms;
		// 100 × 200 × 4.6 ms = 92 sequences / 7 = 13.1.
		{"decode KV-bound", tight.decode(load{100, 100, 200}, 1), 14, ""},
		{"decode infeasible ITL", model{prof: lineProfile(16384), ttft: 0.2, itl: 0.003}.decode(load{1, 100, 100}, 1), 0,
			"ITL target 3ms below batch-1 ITL 4ms: no replica count meets it"},
		{"decode corrected infeasible", line.decode(load{1, 100, 100}, 6), 0, "ITL target 20.05ms below batch-1 ITL 24ms"},
		{"decode context too long", model{prof: lineProfile(1), ttft: 0.2, itl: 0.02}.decode(load{1, 100, 100}, 1), 0,
			"a 150-token context does not fit one replica's KV cache (1 blocks of 16)"},
		// At 100 req/s a replica prefills 1 s/n of each second; 4 is the
		// first count whose decode batch of ⌈401/n⌉ still meets the ITL
		// target in the time prefill leaves: ITL(101) = 14 ms ≤ 20.05 × 0.75.
		{"aggregated", line.aggregated(load{100, 100, 200}, 1, 1), 4, ""},
		{"aggregated light", line.aggregated(load{10, 100, 200}, 1, 1), 1, ""},
		{"aggregated idle", line.aggregated(load{0, 100, 200}, 1, 1), 0, ""},
		{"aggregated infeasible TTFT", model{prof: lineProfile(16384), ttft: 0.005, itl: 0.02005}.aggregated(load{1, 100, 200}, 1, 1), 0, "TTFT target 5ms below a lone prefill's 10ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			switch {
			case tt.infeasible != "":
				if !tt.got.infeasible || !strings.Contains(tt.got.why, tt.infeasible) {
					t.Errorf("got %+v, want infeasible: %q", tt.got, tt.infeasible)
				}
			case tt.got.infeasible || tt.got.replicas != tt.want:
				t.Errorf("got %+v, want %d replicas", tt.got, tt.want)
			}
		})
	}
}

func TestExpectedLatency(t *testing.T) {
	t.Parallel()
	m := model{prof: testProfile(), ttft: 0.2, itl: 0.02}
	line := model{prof: lineProfile(16384), ttft: 0.2, itl: 0.02}
	tests := []struct {
		name string
		got  func() (float64, bool)
		want float64
		ok   bool
	}{
		// M/M/5 at a = 4: C = 0.5541, so the p90 is 40 ms plus
		// ln(5.541) × 40 ms / (5 − 4).
		{"TTFT at ρ 0.8", func() (float64, bool) { return m.expectedTTFT(load{100, 512, 256}, 5) }, 0.04 + math.Log(10*0.5541126)*0.04, true},
		{"TTFT saturated", func() (float64, bool) { return m.expectedTTFT(load{100, 512, 256}, 4) }, 0, false},
		{"TTFT no replicas", func() (float64, bool) { return m.expectedTTFT(load{1, 512, 256}, 0) }, 0, false},
		// b = 10 × 100 × ITL(b): the fixed point is batch 5, 4.4 ms.
		{"ITL fixed point", func() (float64, bool) { return line.expectedITL(load{10, 100, 100}, 1, 0) }, 0.0044, true},
		{"ITL slowed by prefill", func() (float64, bool) { return line.expectedITL(load{1, 100, 1}, 1, 0.5) }, 0.008, true},
		{"ITL over KV", func() (float64, bool) {
			return model{prof: lineProfile(20), itl: 0.02}.expectedITL(load{100, 100, 100}, 1, 0)
		}, 0, false},
		{"ITL prefill-bound", func() (float64, bool) { return line.expectedITL(load{1, 100, 1}, 1, 1) }, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := tt.got()
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSmallest(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 7, 64, 65, 1000, maxNeed} {
		if got := smallest(func(x int) bool { return x >= n }); got != n {
			t.Errorf("smallest(≥%d) = %d", n, got)
		}
	}
	if got := smallest(func(int) bool { return false }); got != maxNeed {
		t.Errorf("smallest(never) = %d, want maxNeed", got)
	}
}

func TestCorrection(t *testing.T) {
	t.Parallel()
	c := newCorrection()
	c.update(0, 1, 0.3) // no sample: no change
	c.update(1, 0, 0.3)
	if c.v != 1 {
		t.Fatalf("correction %v after empty updates, want 1", c.v)
	}
	c.update(100, 1, 1) // a wild ratio enters clamped
	if c.v != MaxCorrection {
		t.Errorf("correction %v after a ratio of 100 at weight 1, want %v", c.v, MaxCorrection)
	}
	for range 50 {
		c.update(0.01, 1, 0.3)
	}
	if c.v < MinCorrection || c.v > MinCorrection+1e-6 {
		t.Errorf("correction %v after tiny ratios, want just above %v", c.v, MinCorrection)
	}
}

// Erlang C against values computed by hand: M/M/1 waits with probability
// ρ, M/M/2 at a = 1 with 1/3.
func TestErlangC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		a    float64
		want float64
	}{{1, 0.5, 0.5}, {1, 0.9, 0.9}, {2, 1, 1.0 / 3}, {5, 4, 0.5541126}} {
		if got := erlangC(tc.n, tc.a); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("C(%d, %v) = %v, want %v", tc.n, tc.a, got, tc.want)
		}
	}
}
