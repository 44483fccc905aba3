package sample

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// fakeConstraint allows the tokens in allow (all when nil), records the
// logits and budget each Mask saw, and refuses tokens in refuse.
type fakeConstraint struct {
	allow    map[uint32]bool
	refuse   map[uint32]bool
	seen     [][]float32 // the logits Mask was given, before masking
	lefts    []int
	accepted []uint32
}

var errRefused = errors.New("refused")

func (c *fakeConstraint) Mask(logits []float32, left int) {
	c.seen = append(c.seen, slices.Clone(logits))
	c.lefts = append(c.lefts, left)
	if c.allow == nil {
		return
	}
	for i := range logits {
		if !c.allow[uint32(i)] {
			logits[i] = float32(math.Inf(-1))
		}
	}
}

func (c *fakeConstraint) Accept(tok uint32) error {
	c.accepted = append(c.accepted, tok)
	if c.refuse[tok] {
		return errRefused
	}
	return nil
}

// TestAdjust checks the arithmetic on a hand-made vector: the bias, then
// for each accepted token count*frequency and presence subtracted; the
// prompt is never counted (only Accept counts), and the caller's logits
// are left alone.
func TestAdjust(t *testing.T) {
	t.Parallel()
	logits := []float32{1, 2, 3, 4}
	tests := []struct {
		name     string
		p        Params
		accepted []uint32
		want     []float32
	}{
		{"nothing", Params{}, []uint32{3, 3}, []float32{1, 2, 3, 4}},
		{"bias", Params{LogitBias: map[uint32]float32{0: 0.5, 3: -4, 9: 100}}, nil, []float32{1.5, 2, 3, 0}},
		{"presence", Params{PresencePenalty: 0.25}, []uint32{3, 3, 1}, []float32{1, 1.75, 3, 3.75}},
		{"frequency", Params{FrequencyPenalty: 0.5}, []uint32{3, 3, 1}, []float32{1, 1.5, 3, 3}},
		{"negative penalties", Params{FrequencyPenalty: -0.5, PresencePenalty: -1}, []uint32{2}, []float32{1, 2, 4.5, 4}},
		{"all", Params{LogitBias: map[uint32]float32{0: 0.5}, FrequencyPenalty: 0.5, PresencePenalty: 0.25}, []uint32{3, 3, 1}, []float32{1.5, 1.25, 3, 2.75}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.p, 1)
			c := &fakeConstraint{}
			s.Constrain(c, 10)
			for _, tok := range tc.accepted {
				if err := s.Accept(tok); err != nil {
					t.Fatal(err)
				}
			}
			in := slices.Clone(logits)
			s.Sample(in)
			if !slices.Equal(in, logits) {
				t.Fatalf("Sample modified the caller's logits: %v", in)
			}
			if len(c.seen) != 1 || !slices.Equal(c.seen[0], tc.want) {
				t.Fatalf("adjusted logits %v, want %v", c.seen, tc.want)
			}
			if !slices.Equal(c.accepted, tc.accepted) {
				t.Fatalf("the constraint accepted %v, want %v", c.accepted, tc.accepted)
			}
		})
	}
}

// TestBiasAndPenaltiesSteer: the draw follows the adjusted logits, the
// logprobs stay those of the raw ones.
func TestBiasAndPenaltiesSteer(t *testing.T) {
	t.Parallel()
	logits := []float32{1, 3, 0.5, 2}
	raw := New(Params{Logprobs: true}, 1)
	raw.Sample(logits)
	rawLP, _ := raw.TakeLogprob()

	s := New(Params{Logprobs: true, LogitBias: map[uint32]float32{2: 10}}, 1)
	in := slices.Clone(logits)
	if tok := s.Sample(in); tok != 2 {
		t.Fatalf("bias: token %d, want 2", tok)
	}
	lp, ok := s.TakeLogprob()
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v))
	}
	if want := float32(0.5 - math.Log(sum)); !ok || math.Abs(float64(lp.Logprob-want)) > 1e-6 {
		t.Fatalf("logprob %v (%v), want the raw %v", lp.Logprob, ok, want)
	}
	if !slices.Equal(in, logits) {
		t.Fatalf("Sample modified the caller's logits: %v", in)
	}
	if rawLP.Logprob == lp.Logprob {
		t.Fatal("the recorded token is not the drawn one")
	}

	// Greedy under a frequency penalty walks down the ranking: 1; then 3
	// (1 is down to 1); then 0 (0 and 1 tie at 1: lower id first); then
	// 1 (0 is down to -1).
	p := New(Params{FrequencyPenalty: 2}, 1)
	var got []uint32
	for range 4 {
		tok := p.Sample(logits)
		got = append(got, tok)
		if err := p.Accept(tok); err != nil {
			t.Fatal(err)
		}
	}
	if want := []uint32{1, 3, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("penalised greedy tokens %v, want %v", got, want)
	}
}

// TestConstraint: Mask sees how many tokens may follow, the draw never
// leaves the allowed set, Accept reaches the constraint and reports its
// refusal, and a mask that leaves nothing gives the best adjusted token.
func TestConstraint(t *testing.T) {
	t.Parallel()
	logits := []float32{0.1, 3, 2.9, -1, 0.5}
	for _, p := range []Params{{}, {Temperature: 1.5}, {Temperature: 1, TopP: 0.5}, {Temperature: 1, TopK: 2}} {
		c := &fakeConstraint{allow: map[uint32]bool{0: true, 3: true}}
		s := New(p, 3)
		s.Constrain(c, 5)
		var got []uint32
		for range 5 {
			tok := s.Sample(logits)
			if tok != 0 && tok != 3 {
				t.Fatalf("%+v: drew masked token %d", p, tok)
			}
			if err := s.Accept(tok); err != nil {
				t.Fatal(err)
			}
			got = append(got, tok)
		}
		if want := []int{4, 3, 2, 1, 0}; !slices.Equal(c.lefts, want) {
			t.Fatalf("%+v: Mask saw left %v, want %v", p, c.lefts, want)
		}
		if !slices.Equal(c.accepted, got) {
			t.Fatalf("%+v: constraint accepted %v, want %v", p, c.accepted, got)
		}
	}

	c := &fakeConstraint{allow: map[uint32]bool{}, refuse: map[uint32]bool{2: true}}
	s := New(Params{Temperature: 1, LogitBias: map[uint32]float32{2: 1}}, 1)
	s.Constrain(c, 3)
	tok := s.Sample(logits)
	if tok != 2 {
		t.Fatalf("all masked: token %d, want 2, the best after the bias", tok)
	}
	if err := s.Accept(tok); !errors.Is(err, errRefused) {
		t.Fatalf("Accept = %v, want the constraint's refusal", err)
	}
}

// TestFastPathUnchanged: without anything to apply, Sample allocates
// nothing and draws exactly what plain sampling draws, also after Accept
// and with penalties set but nothing accepted yet. (Not parallel:
// AllocsPerRun refuses.)
func TestFastPathUnchanged(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(i%37) / 7
	}
	for _, p := range []Params{{}, {Temperature: 1, TopP: 0.9}, {Temperature: 0.7, TopK: 40}} {
		plain, pen := New(p, 9), New(Params{Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK, PresencePenalty: 1}, 9)
		zeroBias := p
		zeroBias.LogitBias = map[uint32]float32{5: 0}
		zb := New(zeroBias, 9)
		for i := range 50 {
			a, b, c := plain.Sample(logits), zb.Sample(logits), pen.Sample(logits)
			if a != b || a != c {
				t.Fatalf("%+v draw %d: %d, zero bias %d, penalty with nothing accepted %d", p, i, a, b, c)
			}
			if err := plain.Accept(a); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(20, func() { plain.Sample(logits) }); n != 0 {
			t.Errorf("%+v: %v allocations per Sample", p, n)
		}
		if n := testing.AllocsPerRun(20, func() { zb.Sample(logits) }); n != 0 {
			t.Errorf("%+v with a bias: %v allocations per Sample once warm", p, n)
		}
	}
}

func TestValidateProcessing(t *testing.T) {
	t.Parallel()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name string
		p    Params
		ok   bool
	}{
		{"penalties at the bounds", Params{PresencePenalty: -2, FrequencyPenalty: 2}, true},
		{"bias at the bounds", Params{LogitBias: map[uint32]float32{1: -100, 2: 100}}, true},
		{"json object", Params{Format: Format{JSONObject: true}}, true},
		{"json schema", Params{Format: Format{JSONSchema: `{"type":"object"}`}}, true},
		{"presence NaN", Params{PresencePenalty: nan}, false},
		{"presence +Inf", Params{PresencePenalty: inf}, false},
		{"presence -Inf", Params{PresencePenalty: -inf}, false},
		{"presence > 2", Params{PresencePenalty: 2.01}, false},
		{"frequency < -2", Params{FrequencyPenalty: -2.5}, false},
		{"frequency NaN", Params{FrequencyPenalty: nan}, false},
		{"bias NaN", Params{LogitBias: map[uint32]float32{3: nan}}, false},
		{"bias +Inf", Params{LogitBias: map[uint32]float32{3: inf}}, false},
		{"bias -Inf", Params{LogitBias: map[uint32]float32{3: -inf}}, false},
		{"bias > 100", Params{LogitBias: map[uint32]float32{3: 100.5}}, false},
		{"both formats", Params{Format: Format{JSONObject: true, JSONSchema: "{}"}}, false},
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
	// The message names the lowest bad id whatever the map's order.
	p := Params{LogitBias: map[uint32]float32{9: 200, 4: -300, 7: 1, 5: nan}}
	for range 20 {
		if err := p.Validate(); err == nil || err.Error() != "invalid sampling parameters: logit_bias -300 for token 4 must be in [-100, 100]" {
			t.Fatalf("Validate() = %v", err)
		}
	}
}

func TestNeedsLogits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    Params
		want bool
	}{
		{Params{Temperature: 1, TopP: 0.5, TopK: 3}, false},
		{Params{Logprobs: true}, true},
		{Params{PresencePenalty: 0.1}, true},
		{Params{FrequencyPenalty: -0.1}, true},
		{Params{LogitBias: map[uint32]float32{1: 0}}, true},
		{Params{LogitBias: map[uint32]float32{}}, false},
		{Params{Format: Format{JSONObject: true}}, true},
		{Params{Format: Format{JSONSchema: "{}"}}, true},
	} {
		if got := tc.p.NeedsLogits(); got != tc.want {
			t.Errorf("%+v: NeedsLogits = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// BenchmarkSampleProcessed is the cost of a bias, penalties over 100
// emitted tokens and a (no-op) constraint over a 32,000-token vocabulary,
// beside BenchmarkSampleTopP.
func BenchmarkSampleProcessed(b *testing.B) {
	bias := map[uint32]float32{}
	for i := range 50 {
		bias[uint32(i*97)] = -5
	}
	s := New(Params{Temperature: 1, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, LogitBias: bias}, 1)
	s.Constrain(nopConstraint{}, 1<<30)
	for i := range 100 {
		_ = s.Accept(uint32(i * 31))
	}
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(i%97) / 10
	}
	for b.Loop() {
		s.Sample(logits)
	}
}

type nopConstraint struct{}

func (nopConstraint) Mask([]float32, int) {}
func (nopConstraint) Accept(uint32) error { return nil }
