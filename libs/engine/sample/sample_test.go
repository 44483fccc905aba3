package sample

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    Params
		ok   bool
	}{
		{"greedy", Params{}, true},
		{"full", Params{Temperature: 0.8, TopP: 0.9, TopK: 40}, true},
		{"negative temp", Params{Temperature: -1}, false},
		{"top_p > 1", Params{TopP: 1.5}, false},
		{"negative top_k", Params{TopK: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.p.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("Validate() = %v, ok=%v", err, tc.ok)
			}
		})
	}
}

func TestSample(t *testing.T) {
	t.Parallel()
	logits := func() []float32 { return []float32{0.1, 3, 2.9, -1, 0.5} }
	tests := []struct {
		name    string
		p       Params
		allowed map[uint32]bool
	}{
		{"greedy", Params{}, map[uint32]bool{1: true}},
		{"top_k 1", Params{Temperature: 1, TopK: 1}, map[uint32]bool{1: true}},
		{"top_k 2", Params{Temperature: 1, TopK: 2}, map[uint32]bool{1: true, 2: true}},
		{"top_p small", Params{Temperature: 1, TopP: 0.3}, map[uint32]bool{1: true}},
		{"hot", Params{Temperature: 5}, map[uint32]bool{0: true, 1: true, 2: true, 3: true, 4: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.p, 7)
			for range 200 {
				if got := s.Sample(logits()); !tc.allowed[got] {
					t.Fatalf("sampled %d, allowed %v", got, tc.allowed)
				}
			}
		})
	}
}

func TestReproducible(t *testing.T) {
	t.Parallel()
	p := Params{Temperature: 1.2, TopP: 0.95}
	a, b := New(p, 42), New(p, 42)
	logits := []float32{1, 2, 3, 2, 1, 0, 1, 2}
	for i := range 100 {
		x := a.Sample(append([]float32(nil), logits...))
		y := b.Sample(append([]float32(nil), logits...))
		if x != y {
			t.Fatalf("draw %d differs: %d vs %d", i, x, y)
		}
	}
}

func BenchmarkSampleTopP(b *testing.B) {
	s := New(Params{Temperature: 1, TopP: 0.9}, 1)
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(i%97) / 10
	}
	buf := make([]float32, len(logits))
	for b.Loop() {
		copy(buf, logits)
		s.Sample(buf)
	}
}

// TestLogprobs: the recorded log probability is the log-softmax of the raw
// logits whatever the temperature, the top list is ordered with ties by
// id, a forced token's is recorded without changing the draws, and
// nothing is recorded unless asked.
func TestLogprobs(t *testing.T) {
	t.Parallel()
	logits := []float32{1, 3, 0.5, 3, -2, 2}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v))
	}
	want := func(tok int) float32 { return float32(float64(logits[tok]) - math.Log(sum)) }
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 }

	g := New(Params{Logprobs: true, TopLogprobs: 3}, 1)
	tok := g.Sample(slices.Clone(logits))
	lp, ok := g.TakeLogprob()
	if tok != 1 || !ok || !near(lp.Logprob, want(1)) {
		t.Fatalf("greedy: token %d logprob %v (%v), want 1 and %v", tok, lp.Logprob, ok, want(1))
	}
	wantTop := []uint32{1, 3, 5} // 3 and 3 tie: lower id first
	if len(lp.Top) != 3 {
		t.Fatalf("top %+v", lp.Top)
	}
	for i, tl := range lp.Top {
		if tl.Token != wantTop[i] || !near(tl.Logprob, want(int(tl.Token))) {
			t.Fatalf("top %+v, want tokens %v", lp.Top, wantTop)
		}
	}
	if _, ok := g.TakeLogprob(); ok {
		t.Fatal("a Logprob is taken once")
	}

	// Sampled at temperature 2, the logprob is still the raw one; forcing
	// a token records its logprob and leaves the draws as they were.
	seed := uint64(7)
	plain := New(Params{Temperature: 2, Seed: &seed}, seed)
	forced := New(Params{Temperature: 2, Seed: &seed, Logprobs: true}, seed)
	for i := range 50 {
		if i == 0 {
			forced.Force(4)
		}
		a, b := plain.Sample(slices.Clone(logits)), forced.Sample(slices.Clone(logits))
		lp, ok := forced.TakeLogprob()
		rec := int(b)
		if i == 0 {
			rec = 4
		}
		if a != b || !ok || !near(lp.Logprob, want(rec)) || lp.Top != nil {
			t.Fatalf("draw %d: %d vs %d, logprob %v (%v), want %v for token %d", i, a, b, lp.Logprob, ok, want(rec), rec)
		}
	}
	if _, ok := plain.TakeLogprob(); ok {
		t.Fatal("recorded without Params.Logprobs")
	}
	for _, p := range []Params{{TopLogprobs: 2}, {Logprobs: true, TopLogprobs: MaxTopLogprobs + 1}, {Logprobs: true, TopLogprobs: -1}} {
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
}

// BenchmarkLogprobs is the cost of recording a position's logprobs (and
// top alternatives) over a 32,000-token vocabulary, beside plain greedy.
func BenchmarkLogprobs(b *testing.B) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(i%977) / 97
	}
	for _, p := range []Params{{}, {Logprobs: true}, {Logprobs: true, TopLogprobs: 5}, {Logprobs: true, TopLogprobs: 20}} {
		b.Run(fmt.Sprintf("top=%d,on=%v", p.TopLogprobs, p.Logprobs), func(b *testing.B) {
			s := New(p, 1)
			for b.Loop() {
				s.Sample(logits)
				s.TakeLogprob()
			}
		})
	}
}

// A nucleus smaller than one token's share of a flat distribution still
// holds the most likely token (every token fell below llama2.c's cutoff
// and the draw indexed an empty list: the engine's loop panicked), and
// NaN logits fall back to the argmax instead of crashing.
func TestTopPBelowFlatShare(t *testing.T) {
	for _, n := range []int{2, 300, 32000} {
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(i % 7)
		}
		logits[n/2] = 7 // the most likely, barely: flat at this temperature
		if got := New(Params{Temperature: 1e30, TopP: 1e-6}, 1).Sample(logits); got != uint32(n/2) {
			t.Errorf("vocab %d: token %d, want the argmax %d", n, got, n/2)
		}
	}
	nan := []float32{float32(math.NaN()), float32(math.NaN()), float32(math.NaN())}
	if got := New(Params{Temperature: 1, TopP: 0.9}, 1).Sample(nan); got != 0 {
		t.Errorf("NaN logits: token %d, want 0", got)
	}
}
