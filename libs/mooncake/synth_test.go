package mooncake

import (
	"slices"
	"testing"
)

func TestSynthTokens(t *testing.T) {
	t.Parallel()
	s := Synth{Vocab: 512, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1}
	a := Record{InputLength: 1024, HashIDs: []int64{0, 1}}
	b := Record{InputLength: 1500, HashIDs: []int64{0, 1, 2}}
	c := Record{InputLength: 700, HashIDs: []int64{0, 3}}
	d := Record{InputLength: 700, HashIDs: []int64{5, 1}}
	ta, tb, tc, td := s.Tokens(nil, a, 0), s.Tokens(nil, b, 0), s.Tokens(nil, c, 0), s.Tokens(nil, d, 0)

	tests := []struct {
		name string
		got  bool
	}{
		{"same ids give same tokens", slices.Equal(ta, s.Tokens(nil, a, 0))},
		{"length is input_length", len(ta) == 1024 && len(tb) == 1500 && len(tc) == 700},
		{"shared two-block prefix", slices.Equal(ta, tb[:1024])},
		{"shared one-block prefix", slices.Equal(ta[:512], tc[:512])},
		{"diverges after the prefix", !slices.Equal(ta[512:700], tc[512:700])},
		{"same id after a different first block gives the same block", slices.Equal(ta[512:700], td[512:700])},
		{"different first block differs", !slices.Equal(ta[:512], td[:512])},
		{"truncated last block is a prefix of the full block", slices.Equal(tc[512:], s.Block(nil, 3, 188))},
		{"limit truncates", slices.Equal(s.Tokens(nil, b, 600), tb[:600])},
	}
	for _, tt := range tests {
		if !tt.got {
			t.Errorf("%s: false", tt.name)
		}
	}
	for _, tok := range tb {
		if tok < 3 || tok >= 512 {
			t.Fatalf("token %d outside [3,512)", tok)
		}
	}
}

func TestSynthSeedChangesTokens(t *testing.T) {
	t.Parallel()
	r := Record{InputLength: 64, HashIDs: []int64{7}}
	a := Synth{Vocab: 32000, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1}
	b := a
	b.Seed = 2
	if slices.Equal(a.Tokens(nil, r, 0), b.Tokens(nil, r, 0)) {
		t.Fatal("different seeds gave the same tokens")
	}
}

func TestSynthScaledBlocks(t *testing.T) {
	t.Parallel()
	s := Synth{Vocab: 512, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 16}
	tests := []struct {
		in      int
		ids     int
		wantLen int
	}{
		{in: 6758, ids: 14, wantLen: 212}, // ceil(6758*16/512)
		{in: 512, ids: 1, wantLen: 16},
		{in: 1, ids: 1, wantLen: 1},
		{in: 1024, ids: 2, wantLen: 32},
		{in: 513, ids: 2, wantLen: 17},
	}
	for _, tt := range tests {
		ids := make([]int64, tt.ids)
		for i := range ids {
			ids[i] = int64(i)
		}
		r := Record{InputLength: tt.in, HashIDs: ids}
		if got := s.InputLen(r); got != tt.wantLen {
			t.Errorf("InputLen(%d over %d ids) = %d, want %d", tt.in, tt.ids, got, tt.wantLen)
		}
		toks := s.Tokens(nil, r, 0)
		if len(toks) != tt.wantLen {
			t.Errorf("Tokens len %d, want %d", len(toks), tt.wantLen)
		}
		if tt.ids >= 2 && tt.wantLen > 16 && !slices.Equal(toks[16:min(32, tt.wantLen)], s.Block(nil, 1, tt.wantLen-16)) {
			t.Errorf("second scaled block is not hash id 1's block")
		}
	}
}

func TestSynthValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    Synth
		ok   bool
	}{
		{"default", Synth{Vocab: 512, BlockTokens: 512, ReplayBlockTokens: 512}, true},
		{"tiny vocab", Synth{Vocab: 1, BlockTokens: 512, ReplayBlockTokens: 512}, false},
		{"min beyond vocab", Synth{Vocab: 10, TokenMin: 10, BlockTokens: 512, ReplayBlockTokens: 512}, false},
		{"replay block larger", Synth{Vocab: 10, BlockTokens: 16, ReplayBlockTokens: 32}, false},
		{"zero block", Synth{Vocab: 10, BlockTokens: 0, ReplayBlockTokens: 0}, false},
	}
	for _, tt := range tests {
		if err := tt.s.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func BenchmarkSynthTokens(b *testing.B) {
	s := Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1}
	ids := make([]int64, 24)
	for i := range ids {
		ids[i] = int64(i)
	}
	r := Record{InputLength: 12035, HashIDs: ids}
	buf := make([]int, 0, 12288)
	b.SetBytes(int64(8 * 12035))
	b.ReportAllocs()
	for b.Loop() {
		buf = s.Tokens(buf[:0], r, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/12035, "ns/token")
}

func BenchmarkParseLine(b *testing.B) {
	line := []byte(`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseLine(line, 512); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSynthGolden pins generated tokens: a replay with a given seed must
// send the same prompts in every version, and the synthetic workload shares
// Mix64.
func TestSynthGolden(t *testing.T) {
	t.Parallel()
	// The reference splitmix64 sequence for seed 1234567.
	state := uint64(1234567)
	for _, want := range []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423} {
		state += 0x9e3779b97f4a7c15
		if got := Mix64(state); got != want {
			t.Fatalf("Mix64 = %d, want %d", got, want)
		}
	}
	s := Synth{Vocab: 512, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 16, Seed: 1}
	if got, want := s.Block(nil, 3, 8), []int{366, 421, 185, 419, 54, 418, 415, 368}; !slices.Equal(got, want) {
		t.Fatalf("Block = %v, want %v", got, want)
	}
}
