package mooncake

import (
	"testing"
	"time"
)

func TestReplay(t *testing.T) {
	t.Parallel()
	r := Replay{Synth: Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1},
		Speed: 2, MaxInputTokens: 1000, MaxOutputTokens: 2048}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	first := Record{TimestampMs: 100, InputLength: 700, OutputLength: 5000, HashIDs: []int64{1, 2}}
	later := Record{TimestampMs: 400, InputLength: 1024, OutputLength: 3, HashIDs: []int64{1, 3}}
	if got := r.At(first, first); got != 0 {
		t.Errorf("first arrives at %v, want 0", got)
	}
	if got := r.At(later, first); got != 150*time.Millisecond {
		t.Errorf("later arrives at %v, want 150ms (300 ms of trace at speed 2)", got)
	}
	if got := len(r.Prompt(nil, first)); got != 700 {
		t.Errorf("first prompt has %d tokens, want 700", got)
	}
	if got := len(r.Prompt(nil, later)); got != 1000 {
		t.Errorf("later prompt has %d tokens, want 1000 (capped)", got)
	}
	if r.Output(first) != 2048 || r.Output(later) != 3 {
		t.Errorf("outputs %d, %d: want 2048 (capped) and 3", r.Output(first), r.Output(later))
	}
	uncapped := r
	uncapped.MaxOutputTokens = 0
	if uncapped.Output(first) != 5000 {
		t.Errorf("uncapped output %d, want 5000", uncapped.Output(first))
	}
}

func TestReplayValidate(t *testing.T) {
	t.Parallel()
	good := Replay{Synth: Synth{Vocab: 512, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 16}, Speed: 1}
	for name, mut := range map[string]func(*Replay){
		"zero speed":         func(r *Replay) { r.Speed = 0 },
		"negative speed":     func(r *Replay) { r.Speed = -1 },
		"negative input cap": func(r *Replay) { r.MaxInputTokens = -1 },
		"negative output":    func(r *Replay) { r.MaxOutputTokens = -1 },
		"bad synth":          func(r *Replay) { r.Synth.Vocab = 1 },
	} {
		r := good
		mut(&r)
		if err := r.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
