package workload

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// TestSyntheticGolden pins the prompts of a seeded synthetic run, shared
// prefixes included, so a refactor of the generator cannot change what a
// seed sends.
func TestSyntheticGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		chat bool
		want string
	}{
		{"completions", false, "4c0c3a2403bd8843"},
		{"chat", true, "99aa802e0826edd6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := baseCfg(t)
			cfg.Chat = tt.chat
			cfg.SharedPrefixRatio = 0.5
			cfg.PrefixPool = 3
			cfg.Turns = mustDist(t, "fixed:2")
			src := newSynth(t, cfg)
			h := fnv.New64a()
			for range 4 {
				s, _ := src.Next()
				for turn, ok := s.Next(""); ok; turn, ok = s.Next("") {
					fmt.Fprintf(h, "%v|%v|%d|%d;", turn.Request.Tokens, turn.Request.Messages, turn.Request.MaxTokens, turn.InputTokens)
				}
			}
			if got := fmt.Sprintf("%016x", h.Sum64()); got != tt.want {
				t.Errorf("prompts hash %s, want %s", got, tt.want)
			}
		})
	}
}

// TestSharedPrefixGolden pins the first values of a shared prefix, in both
// of its forms.
func TestSharedPrefixGolden(t *testing.T) {
	t.Parallel()
	cfg := baseCfg(t)
	s := &synthSession{cfg: &cfg}
	if got, want := fmt.Sprint(s.sharedTokens(nil, 2, 8)), "[470 458 105 594 167 607 130 991]"; got != want {
		t.Errorf("sharedTokens = %s, want %s", got, want)
	}
	if got, want := s.sharedWords(2, 8), "down first go time many from out each"; got != want {
		t.Errorf("sharedWords = %q, want %q", got, want)
	}
}
