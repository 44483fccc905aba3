package sample

import (
	"errors"
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
